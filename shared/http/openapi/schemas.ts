/**
 * The shapes of the OpenAPI document (shared/service/openapi.ts): valibot schemas converted to JSON Schema with
 * the annotations of shared/http/endpoint.ts, request objects closed and accepting null for optional members, and the
 * Builder that collects the named schemas and parameters as components.
 */
import * as v from "valibot";
import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from "@valibot/to-json-schema";
import {
  AS_INTEGER,
  AS_SCHEMA,
  CONFIGURED,
  baseOf,
  entriesOf,
  parameterNames,
  schemaNames,
  type Group,
  type ProblemCode,
  type RequestSchema,
} from "../endpoint";
import type { Config } from "../../config";
import { COMMON_CODES, paramRef, schemaRef, type Json } from "./kit";

/** valibot → JSON Schema with the annotations of shared/http/endpoint.ts; named schemas become component references. */
function conversion(config: Config, definitions: Record<string, v.GenericSchema>): ConversionConfig {
  return {
    target: "draft-2020-12",
    // Transforms have no JSON Schema; the pipe around them still converts (patterns first, then the transform).
    errorMode: "ignore",
    definitions,
    overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
    overrideAction: ({ valibotAction, jsonSchema }) => annotate(valibotAction, jsonSchema as Json, config) as JsonSchema | undefined,
  };
}

const withRule = (schema: Json, message: unknown): Json =>
  typeof message === "string" ? { ...schema, "x-rules": [...((schema["x-rules"] as string[] | undefined) ?? []), message] } : schema;

/**
 * The annotations of shared/http/endpoint.ts: check messages as `x-rules`, `configured()` text, `asInteger()` ranges,
 * `asSchema()` replacements; and UTF-8 byte limits as the length bounds they imply (a code point is 1 to 4
 * bytes), with the exact rule under `x-rules` unless the bound is exact (`minBytes(1)`: not empty).
 */
function annotate(valibotAction: unknown, schema: Json, config: Config): Json | undefined {
  const action = valibotAction as { type: string; message?: unknown; requirement?: unknown; metadata?: Record<string, unknown> };
  if (action.type === "check") return withRule(schema, action.message);
  if (action.type === "min_bytes" && schema.type === "string") {
    const bytes = action.requirement as number;
    const bounded = { ...schema, minLength: Math.max((schema.minLength as number | undefined) ?? 0, Math.ceil(bytes / 4)) };
    return bytes === 1 ? bounded : withRule(bounded, action.message);
  }
  if (action.type === "max_bytes" && schema.type === "string") {
    const bytes = action.requirement as number;
    return withRule({ ...schema, maxLength: Math.min((schema.maxLength as number | undefined) ?? bytes, bytes) }, action.message);
  }
  const replacement = action.type === "metadata" ? action.metadata?.[AS_SCHEMA] : undefined;
  if (replacement) {
    const { description } = schema;
    return { ...(replacement as Json), ...(description === undefined ? {} : { description }) };
  }
  const doc = action.type === "metadata" ? action.metadata?.[CONFIGURED] : undefined;
  if (typeof doc === "function") {
    const { [CONFIGURED]: _, ...rest } = schema;
    return { ...rest, ...(doc as (c: Config) => Json)(config) };
  }
  const integer = action.type === "metadata" ? action.metadata?.[AS_INTEGER] : undefined;
  if (integer) {
    const { [AS_INTEGER]: _, pattern: _pattern, ...rest } = schema;
    return { ...rest, type: "integer", ...(integer as Json) };
  }
  return undefined;
}

/** Keywords that describe a schema without constraining it. */
const ANNOTATIONS = new Set(["title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"]);
const isAnnotation = (key: string) => ANNOTATIONS.has(key) || key.startsWith("x-");
const split = (schema: Json) => {
  const notes: Json = {};
  const rules: Json = {};
  for (const [key, value] of Object.entries(schema)) (isAnnotation(key) ? notes : rules)[key] = value;
  return { notes, rules };
};

/** A schema that accepts every value (annotations aside). */
const unconstrained = (schema: Json) => Object.keys(split(schema).rules).length === 0;

/** Whether a schema visibly accepts `null` (references are not followed). */
function acceptsNull(schema: Json): boolean {
  if (unconstrained(schema)) return true;
  const { rules } = split(schema);
  if (Object.keys(rules).length === 1 && Array.isArray(rules.anyOf)) return (rules.anyOf as Json[]).some(acceptsNull);
  if (Object.keys(rules).length === 1 && "const" in rules) return rules.const === null;
  if (Array.isArray(schema.enum) && !schema.enum.includes(null)) return false;
  return schema.type === "null" || (Array.isArray(schema.type) && schema.type.includes("null"));
}

/** `schema` or null, written once: `null` joins a type list or an enum, else one `{type: "null"}` branch. */
function orNull(schema: Json): Json {
  if (acceptsNull(schema)) return schema;
  const { notes, rules } = split(schema);
  const keys = Object.keys(rules);
  const types = typeof rules.type === "string" ? [rules.type] : undefined;
  if (types && keys.every((k) => k !== "const" && k !== "$ref" && k !== "anyOf" && k !== "oneOf" && k !== "allOf" && k !== "not")) {
    return { ...schema, type: [...types, "null"], ...(Array.isArray(rules.enum) ? { enum: [...rules.enum, null] } : {}) };
  }
  if (keys.length === 1 && Array.isArray(rules.anyOf)) return { ...schema, anyOf: [...rules.anyOf, { type: "null" }] };
  return { anyOf: [rules, { type: "null" }], ...notes };
}

/**
 * A request object: unknown members are rejected, and optional members also accept `null` (API.md §1.3:
 * an optional member sent as `null` is treated as absent).
 */
function requestObject(schema: Json): Json {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries((schema.properties as Record<string, Json> | undefined) ?? {}).map(([name, prop]) => [
      name,
      required.has(name) ? prop : orNull(prop),
    ]),
  );
  return { ...schema, type: "object", properties, additionalProperties: false };
}

const pascal = (s: string) => s.replace(/^./, (ch) => ch.toUpperCase());

/** The value of a variant option's discriminator (its `key` entry is a literal). */
function discriminatorValue(option: v.GenericSchema, key: string): string | undefined {
  const entry = (baseOf(option) as { entries?: Record<string, v.GenericSchema> }).entries?.[key];
  const literal = entry && (baseOf(entry) as { literal?: unknown }).literal;
  return typeof literal === "string" ? literal : undefined;
}

/**
 * What the conversion leaves to tidy, once converted (an `overrideSchema` hook runs on every schema and made
 * the document several times slower to build): a union with a branch that accepts anything (a nullable
 * `unknown`, say) accepts anything, so it is that branch's annotations alone (no `anyOf: [{}, {type: "null"}]`),
 * and a union states null once.
 */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (node === null || typeof node !== "object") return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node))
    out[key] = key === "examples" || key === "default" || key === "const" ? value : tidy(value);
  if (!Array.isArray(out.anyOf)) return out;
  const { anyOf, ...notes } = out as { anyOf: Json[] };
  if (anyOf.some(unconstrained)) return Object.assign({}, ...anyOf.filter(unconstrained).map((b) => split(b).notes), notes);
  // `{type: "null"}` beside a branch that accepts null already (a nullable inside a nullish) is dropped.
  const isNull = (b: Json) => JSON.stringify(b) === '{"type":"null"}';
  const branches = anyOf.some((b) => !isNull(b) && acceptsNull(b)) ? anyOf.filter((b) => !isNull(b)) : anyOf;
  return branches.length === 1 ? { ...branches[0], ...notes } : { ...out, anyOf: branches };
}

export class Builder {
  readonly definitions: Record<string, v.GenericSchema> = {};
  readonly parameters: Record<string, Json> = {};
  private readonly cfg: ConversionConfig;
  private readonly requestBodies = new Set<string>();
  /** Named variants (Node, Trigger): their discriminator, each value mapped to its named option. */
  private readonly discriminators: Record<string, { propertyName: string; mapping: Record<string, string> }> = {};

  constructor(private readonly config: Config) {
    const define = (name: string, schema: v.GenericSchema) => {
      if (this.definitions[name] && this.definitions[name] !== schema) throw new Error(`Two schemas are named ${name}`);
      this.definitions[name] = schema;
    };
    for (const [schema, name] of schemaNames) {
      define(name, schema);
      // A named variant (Node, Trigger) names its options after their discriminator value: `CronTrigger`.
      const variant = schema as { type: string; key?: string; options?: v.GenericSchema[] };
      if (variant.type !== "variant") continue;
      const mapping: Record<string, string> = {};
      for (const option of variant.options!) {
        const value = discriminatorValue(option, variant.key!);
        if (value === undefined) break;
        const optionName = schemaNames.get(option) ?? `${pascal(value)}${name}`;
        define(optionName, option);
        mapping[value] = schemaRef(optionName).$ref as string;
      }
      // A discriminator selects named schemas only: a variant some option of which has no value stays a oneOf.
      if (Object.keys(mapping).length === variant.options!.length) this.discriminators[name] = { propertyName: variant.key!, mapping };
    }
    this.cfg = conversion(config, this.definitions);
  }

  /** A schema where it is used: a reference when it is named, else inline. */
  schema(schema: v.GenericSchema): Json {
    const { $schema: _, $defs: _defs, ...rest } = toJsonSchema(schema, this.cfg) as Json;
    return tidy(rest) as Json;
  }

  /** Whether a request body must be sent: an empty body is read as `{}` (API.md §1.3), and `{}` fails validation. */
  bodyRequired(schema: v.GenericSchema): boolean {
    return !v.safeParse(schema, {}).success;
  }

  /** The body schema of a request (a closed object accepting null for optional members). */
  requestBody(schema: v.GenericSchema): Json {
    const name = schemaNames.get(schema);
    if (!name) return requestObject(this.schema(schema));
    this.requestBodies.add(name);
    return schemaRef(name);
  }

  schemas(): Record<string, Json> {
    const converted = tidy(toJsonSchemaDefs(this.definitions, this.cfg)) as Record<string, Json>;
    for (const name of this.requestBodies) converted[name] = requestObject(converted[name]!);
    for (const [name, discriminator] of Object.entries(this.discriminators)) converted[name] = { ...converted[name], discriminator };
    return converted;
  }

  /** The parameters of one part of a request (path, query or header), named ones as component references. */
  params(schema: RequestSchema | undefined, location: "path" | "query" | "header"): Json[] {
    if (!schema) return [];
    return Object.entries(entriesOf(schema)).map(([name, entry]) => {
      const param = this.param(name, location, entry);
      const component = parameterNames.get(entry);
      if (!component) return param;
      const existing = this.parameters[component];
      if (existing && (existing.name !== name || existing.in !== location))
        throw new Error(`Parameter ${component} is used as two parameters`);
      this.parameters[component] = param;
      return paramRef(component);
    });
  }

  private param(name: string, location: string, entry: v.GenericSchema): Json {
    const { description, ...schema } = this.schema(entry);
    if (schema.type === "integer" && typeof schema.default === "string") schema.default = Number(schema.default);
    const optional = ["optional", "exact_optional", "nullish"].includes(entry.type);
    return {
      name,
      in: location,
      required: location === "path" || !optional,
      ...(description ? { description } : {}),
      ...(schema.type === "array" ? { style: "form", explode: true } : {}),
      schema,
    };
  }

  /** The problem code catalogue for a group's routes. */
  codes(group: Group): Record<string, ProblemCode> {
    return { ...COMMON_CODES, ...group.codes };
  }

  get settings() {
    return this.config;
  }
}
