/**
 * The service's own public routes (API.md §6.1, §6.3) as declarations: health (bound in ./health.ts) and
 * the API document and its HTML reference (bound in ./openapi.ts).
 */
import * as v from "valibot";
import { component, configured, described, endpoint, group } from "../http/endpoint";
import { ChainId } from "../http/schemas";

const Health = component(
  "Health",
  v.object({
    status: v.pipe(
      v.picklist(["ok", "degraded"]),
      v.description(
        "`ok` when every dependency check (datastore, key service, default-chain RPC) passed, `degraded` otherwise. Checks are cached for up to 10 s.",
      ),
    ),
    version: v.pipe(
      v.string(),
      v.description("Service version (semver). Clients may put it in the sign-in message's `Version:` line."),
      configured((config) => ({ examples: [config.serviceVersion] })),
    ),
    chainId: described(ChainId, "`default_chain_id` of the deployment."),
  }),
);

/** What `/openapi.json` answers, in outline. */
const OpenApiDocument = v.object({
  openapi: v.pipe(v.string(), v.regex(/^3\.1\.\d+$/)),
  info: v.object({ title: v.string(), version: v.string() }),
  paths: v.record(v.string(), v.unknown()),
});

export const health = endpoint({
  method: "GET",
  path: "/health",
  operationId: "getHealth",
  summary: "Service health",
  description:
    "200 whenever the process can answer; the body says whether the dependencies (datastore, key service, default-chain RPC) answer too. The checks are cached for up to 10 s.",
  public: true,
  responses: { 200: { description: "The service answers; `status` tells whether its dependencies do.", body: Health } },
});

export const openapi = endpoint({
  method: "GET",
  path: "/openapi.json",
  operationId: "getOpenApiDocument",
  summary: "This OpenAPI document",
  description: "The OpenAPI 3.1 description of the routes this deployment serves.",
  public: true,
  responses: { 200: { description: "An OpenAPI 3.1 document.", body: OpenApiDocument } },
});

export const docs = endpoint({
  method: "GET",
  path: "/docs",
  operationId: "getDocs",
  summary: "Interactive API reference",
  description: "An HTML reference rendered from `/openapi.json`, with a plain list of the operations that needs no JavaScript.",
  public: true,
  responses: { 200: { description: "An HTML page.", body: v.string(), media: "text/html" } },
});

export const serviceContract = group({
  name: "Service",
  description: "Health and API documentation (public).",
  endpoints: [health, openapi, docs],
});
