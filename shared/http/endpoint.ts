/**
 * Route declarations: what a route accepts and answers, written once as valibot schemas beside its method and
 * path. The app factory (app.ts) validates requests with them and hands handlers typed values; the OpenAPI
 * document (shared/service/openapi.ts) is generated from them. This module and the `endpoints.ts` of each group
 * hold no handlers and import no chain, DynamoDB or KMS code, so any function can know every route cheaply (the
 * catch-all's 404/405) and the document can be built without loading the domain.
 */
import * as v from "valibot";
import type { Config } from "../config";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** The parts of a request a route may declare, in the order their field errors are reported. */
export type Part = "params" | "query" | "headers" | "body";
export const PARTS: readonly Part[] = ["params", "query", "headers", "body"];

/** An object schema (optionally piped, e.g. with a cross-field check) describing one part of a request. */
export type RequestSchema = v.GenericSchema<unknown, unknown> &
  ({ entries: v.ObjectEntries } | { pipe: readonly [{ entries: v.ObjectEntries }, ...unknown[]] });

/** Documentation text; a function when it quotes a setting (limits, lifetimes). */
export type Text = string | ((config: Config) => string);

interface SuccessResponse {
  description: string;
  /** The body's schema; none for 204 and bodiless answers. */
  body?: v.GenericSchema;
  /** Media type of the body (default `application/json`). */
  media?: string;
  /** Headers this answer adds to the common ones, by name. */
  headers?: Record<string, v.GenericSchema>;
}

export interface Endpoint {
  method: Method;
  /** API.md path template, e.g. `/wallets/{address}:withdraw`. */
  path: string;
  operationId: string;
  summary: string;
  description: Text;
  /** Public routes need no token and are rate limited per client IP. */
  public?: boolean;
  /**
   * API.md §21.1: without a bearer token, an `X-Partner-Assertion` carrying `scope` is a credential here (counted in
   * its partner's bucket). `subject`: the assertion must name the user (`sub`, a non-zero address), who is then
   * served as the caller, as with their own token; otherwise the route is served with no caller.
   */
  partner?: { scope: string; subject?: boolean };
  /** Honours `Idempotency-Key` (declared in `headers`): documents the replay header and the key's conflicts. */
  idempotent?: boolean;
  params?: RequestSchema;
  query?: RequestSchema;
  headers?: RequestSchema;
  /** A JSON object body; declaring one makes the app read it (413, 415, INVALID_JSON) before validation. */
  body?: RequestSchema;
  /**
   * Parts whose schema only documents them: their domain function validates them (its own codes, its own
   * order) and the handler receives them raw. Every other declared part is validated before the handler runs.
   */
  checkedByDomain?: readonly Part[];
  /** Success answers by status. */
  responses: { [status: number]: SuccessResponse };
  /** The problem codes this route can answer, by status, besides those every route shares (shared/service/openapi.ts). */
  errors?: { [status: number]: readonly string[] };
  /** A note per error status, shown after its list of codes. */
  notes?: { [status: number]: Text };
}

export interface ProblemCode {
  /** What the code means (documentation). */
  meaning: string;
  /** The answer lists field errors (`errors`). */
  fields?: boolean;
  /** Extra members of an example answer (e.g. a quota's `limit`). */
  example?: (config: Config) => Record<string, unknown>;
}

/** An endpoint group: one tag of the document, one Lambda function in AWS. */
export interface Group {
  name: string;
  description: string;
  /** Codes that only this group's routes answer. */
  codes?: Record<string, ProblemCode>;
  endpoints: readonly Endpoint[];
}

/** Declares one route; `const` keeps literal types so handlers get exact input types. */
export const endpoint = <const E extends Endpoint>(e: E): E => e;
export const group = <const G extends Group>(g: G): G => g;

// ---------------------------------------------------------------------------------------------------------
// Names in the document

/** Schemas shown as `#/components/schemas/<name>`, and query/header/path schemas as `#/components/parameters/<name>`. */
export const schemaNames = new Map<v.GenericSchema, string>();
export const parameterNames = new Map<v.GenericSchema, string>();

/** Names a schema: wherever it is used, the document refers to one component of that name. */
export function component<S extends v.GenericSchema>(name: string, schema: S): S {
  schemaNames.set(schema, name);
  return schema;
}

/** Names a query, header or path parameter schema: routes using it refer to one parameter component. */
export function parameter<S extends v.GenericSchema>(name: string, schema: S): S {
  parameterNames.set(schema, name);
  return schema;
}

/**
 * A schema with a description for one use. A named component stays a reference (`$ref` with a description
 * beside it) instead of being copied inline; validation is the schema's own.
 */
export function described<S extends v.GenericSchema>(schema: S, description: string) {
  const inner: v.GenericSchema<v.InferInput<S>, v.InferOutput<S>> = schemaNames.has(schema) ? v.lazy(() => schema) : schema;
  return v.pipe(inner, v.description(description));
}

// ---------------------------------------------------------------------------------------------------------
// Annotations for what JSON Schema cannot see. Checks (`v.check`) are listed under `x-rules` automatically.

export const CONFIGURED = "x-configured";
export const AS_INTEGER = "x-as-integer";
export const AS_SCHEMA = "x-as-schema";

/** Documentation that quotes settings (a byte limit, a lifetime): merged into the schema when the document is built. */
export const configured = <T>(doc: (config: Config) => Record<string, unknown>) =>
  v.metadata<T, Record<string, unknown>>({ [CONFIGURED]: doc });

/** A query string the pipe turns into an integer, documented as that integer (the range sits after the transform). */
export const asInteger = <T>(minimum: number, maximum: number) =>
  v.metadata<T, Record<string, unknown>>({ [AS_INTEGER]: { minimum, maximum } });

/**
 * A value the pipe reads in a way JSON Schema cannot follow (a transform between its pattern and its range
 * checks): documented by `schema`, written by hand to accept exactly what the pipe accepts, instead of the
 * conversion. A test compares the two.
 */
export const asSchema = <T>(schema: Record<string, unknown>) => v.metadata<T, Record<string, unknown>>({ [AS_SCHEMA]: schema });

/** The entries of a request part's object schema. */
export function entriesOf(schema: RequestSchema): v.ObjectEntries {
  return "entries" in schema ? schema.entries : schema.pipe[0].entries;
}

/** Unwraps optional/nullable wrappers and pipes down to the base schema (to see whether a query entry is a list). */
export function baseOf(schema: v.GenericSchema): v.GenericSchema {
  let s = schema as v.GenericSchema & { wrapped?: v.GenericSchema; pipe?: readonly v.GenericSchema[] };
  for (;;) {
    if (s.wrapped) s = s.wrapped as typeof s;
    else if (s.pipe) s = s.pipe[0] as typeof s;
    else if (s.type === "lazy") s = (s as typeof s & { getter: (x: unknown) => typeof s }).getter(undefined);
    else return s;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Handler input types

type Raw = {
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  headers: Record<string, string | undefined>;
  body: Record<string, unknown>;
};
type Fallback = {
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  headers: Record<string, never>;
  body: undefined;
};

type Declared<E, P extends Part> = E extends { [K in P]: infer S } ? (S extends v.GenericSchema ? S : never) : never;
type Validated<E, P extends Part> = [Declared<E, P>] extends [never] ? Fallback[P] : v.InferOutput<Declared<E, P>>;
type PartInput<E, P extends Part> = E extends { checkedByDomain: readonly (infer D)[] }
  ? P extends D
    ? [Declared<E, P>] extends [never]
      ? Fallback[P]
      : Raw[P]
    : Validated<E, P>
  : Validated<E, P>;

/** What a handler receives: each declared part validated and typed, or raw when its domain function checks it. */
export type Input<E> = { [P in Part]: PartInput<E, P> };

/** The erased form every handler accepts at runtime. */
export type AnyInput = { params: Record<string, unknown>; query: Record<string, unknown>; headers: Record<string, unknown>; body: unknown };
