/**
 * `GET /openapi.json` and `GET /docs` (API.md §6.3): the OpenAPI 3.1 document, generated from the route
 * declarations (api.ts → each group's endpoints.ts), and an HTML reference rendered from it.
 *
 * Every shape comes from a valibot schema converted with @valibot/to-json-schema (draft 2020-12, the OpenAPI
 * 3.1 dialect): schemas named with `component()` become `#/components/schemas/*`, query/header/path schemas
 * named with `parameter()` become `#/components/parameters/*`. What JSON Schema cannot express sits beside the
 * schema that owns it: `v.check` messages become `x-rules`, `configured()` adds text that quotes settings,
 * `asInteger()` documents a query string as the integer it is read as, `asSchema()` replaces what the conversion
 * cannot follow (a range after a transform). A named variant (Node, Trigger) becomes a `oneOf` of its options,
 * each named after its discriminator value (`CronTrigger`), with a `discriminator` on `type`. A request body is
 * `required` when `{}` (what an empty body is read as) fails its schema. The parts of the
 * document, which know no domain module, are the HTTP kit's (shared/http/openapi/): kit.ts (references, titles,
 * the common problem codes), schemas.ts (conversion, the Builder of components), responses.ts, operations.ts,
 * components.ts (what every route shares: common headers and parameters, problem responses, the security
 * scheme, the overview) and docs.ts (the /docs page); this module, which imports every group, assembles them.
 *
 * The document depends only on the settings, so it is built once per configuration and cached.
 */
import { route, type Route } from "../http/app";
import type { Group } from "../http/endpoint";
import { api } from "./api";
import * as Service from "./endpoints";
import type { Config } from "../config";
import { useRuntime } from "../current-runtime";
// Components every route refers to (they register themselves when loaded).
import "../http/problem";
import "../http/paging";
import { API_VERSION, type Json } from "../http/openapi/kit";
import { Builder } from "../http/openapi/schemas";
import { operation } from "../http/openapi/operations";
import { DESCRIPTION, sharedComponents } from "../http/openapi/components";
import { buildDocsPage } from "../http/openapi/docs";

/** The OpenAPI document of `groups` under `config`. */
export function buildDocument(config: Config, groups: readonly Group[] = api): Json {
  const b = new Builder(config);
  const paths: Record<string, Json> = {};
  for (const group of groups) {
    for (const e of group.endpoints) (paths[e.path] ??= {})[e.method.toLowerCase()] = operation(b, group, e);
  }
  const shared = sharedComponents(config);
  return {
    openapi: "3.1.1",
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    info: {
      title: "Workflow Automation Service API",
      version: config.serviceVersion,
      "x-api-version": API_VERSION,
      description: DESCRIPTION(config, groups),
    },
    "x-api-version": API_VERSION,
    servers: [{ url: "/", description: "This deployment" }],
    tags: groups.map((g) => ({ name: g.name, description: g.description })),
    paths,
    components: {
      schemas: b.schemas(),
      parameters: { ...b.parameters, ...(shared.parameters as Json) },
      headers: shared.headers,
      responses: shared.responses,
      securitySchemes: shared.securitySchemes,
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Cache and routes

interface Built {
  document: Json;
  json: string;
  html: string;
}

const cache = new WeakMap<Config, Built>();

function built(config: Config): Built {
  let entry = cache.get(config);
  if (!entry) {
    const document = buildDocument(config);
    entry = { document, json: JSON.stringify(document), html: buildDocsPage(document) };
    cache.set(config, entry);
  }
  return entry;
}

export const openapiRoutes: Route[] = [
  route(Service.openapi, (c) => c.body(built(useRuntime().config).json, 200, { "Content-Type": "application/json; charset=utf-8" })),
  route(Service.docs, (c) => c.html(built(useRuntime().config).html, 200)),
];
