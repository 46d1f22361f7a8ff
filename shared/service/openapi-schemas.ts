/**
 * The shapes of the OpenAPI document (shared/service/openapi.ts): valibot schemas converted to JSON Schema with
 * the annotations of contract.ts, request objects closed and accepting null for optional members, and the
 * Builder that collects the named schemas and parameters as components.
 */
import type * as v from "valibot";
import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from "@valibot/to-json-schema";
import {
  AS_INTEGER,
  CONFIGURED,
  entriesOf,
  parameterNames,
  schemaNames,
  type Group,
  type ProblemCode,
  type RequestSchema,
} from "../http/contract";
import type { Config } from "../config";
import { COMMON_CODES, paramRef, schemaRef, type Json } from "./openapi-kit";

/** valibot → JSON Schema with the annotations of contract.ts; named schemas become component references. */
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

/** The annotations of contract.ts: check messages as `x-rules`, `configured()` text, `asInteger()` ranges. */
function annotate(valibotAction: unknown, schema: Json, config: Config): Json | undefined {
  const action = valibotAction as { type: string; message?: unknown; metadata?: Record<string, unknown> };
  if (action.type === "check" && typeof action.message === "string") {
    return { ...schema, "x-rules": [...((schema["x-rules"] as string[] | undefined) ?? []), action.message] };
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

/**
 * A request object: unknown members are rejected, and optional members also accept `null` (API.md §1.3:
 * an optional member sent as `null` is treated as absent).
 */
function requestObject(schema: Json): Json {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries((schema.properties as Record<string, Json> | undefined) ?? {}).map(([name, prop]) => {
      if (required.has(name)) return [name, prop];
      if (typeof prop.type === "string") return [name, { ...prop, type: [prop.type, "null"] }];
      if (Array.isArray(prop.anyOf)) return [name, { ...prop, anyOf: [...prop.anyOf, { type: "null" }] }];
      if (prop.$ref !== undefined) return [name, { anyOf: [prop, { type: "null" }] }];
      return [name, prop]; // already accepts anything, null included
    }),
  );
  return { ...schema, type: "object", properties, additionalProperties: false };
}

export class Builder {
  readonly definitions: Record<string, v.GenericSchema> = {};
  readonly parameters: Record<string, Json> = {};
  private readonly cfg: ConversionConfig;
  private readonly requestBodies = new Set<string>();

  constructor(private readonly config: Config) {
    for (const [schema, name] of schemaNames) {
      if (this.definitions[name] && this.definitions[name] !== schema) throw new Error(`Two schemas are named ${name}`);
      this.definitions[name] = schema;
    }
    this.cfg = conversion(config, this.definitions);
  }

  /** A schema where it is used: a reference when it is named, else inline. */
  schema(schema: v.GenericSchema): Json {
    const { $schema: _, $defs: _defs, ...rest } = toJsonSchema(schema, this.cfg) as Json;
    return rest;
  }

  /** The body schema of a request (a closed object accepting null for optional members). */
  requestBody(schema: v.GenericSchema): Json {
    const name = schemaNames.get(schema);
    if (!name) return requestObject(this.schema(schema));
    this.requestBodies.add(name);
    return schemaRef(name);
  }

  schemas(): Record<string, Json> {
    const converted = toJsonSchemaDefs(this.definitions, this.cfg) as Record<string, Json>;
    for (const name of this.requestBodies) converted[name] = requestObject(converted[name]!);
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
