/**
 * `GET /openapi.json` and `GET /docs` (API.md §6.3): the document lists exactly the mounted routes, with bearer
 * security exactly on the non-public ones; it is structurally sound (every `$ref` resolves, path templates
 * match their parameters, errors are problem+json); and the service's real answers conform to it.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { useTestRuntime } from "../../support/runtime";
import { buildAuthMessage, messageDefaults, signIn, type SignedIn } from "../../support/auth";
import { createApp, type Route } from "../../../shared/http/app";
import { allRoutes } from "../../../shared/service/app";
import { openapiRoutes } from "../../../shared/service/openapi";
import { verifyPartnerAssertion } from "../../../shared/http/partner-assertion";
import * as v from "valibot";
import { kinds } from "../../../shared/kinds/kinds";
import { Interval } from "../../../shared/execution/endpoints";
import type { Runtime } from "../../../shared/current-runtime";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The service's routes plus these two (whether or not shared/service/app.ts mounts them yet). */
const routes: Route[] = [...allRoutes, ...openapiRoutes.filter((r) => !allRoutes.includes(r))];
const app = createApp(routes, { partners: verifyPartnerAssertion });
const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

let runtime: Runtime;
let doc: Json;

beforeAll(async () => {
  runtime = await useTestRuntime();
  const res = await app.request("/openapi.json");
  expect(res.status).toBe(200);
  doc = (await res.json()) as Json;
});

// ---------------------------------------------------------------------------------------------------------
// Helpers: JSON pointers, a small JSON Schema validator for the keywords the document uses.

function resolvePointer(ref: string): unknown {
  expect(ref.startsWith("#/"), `${ref} is a local reference`).toBe(true);
  let node: unknown = doc;
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || !(key in node)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

const deref = (node: Json): Json => (typeof node.$ref === "string" ? deref(resolvePointer(node.$ref) as Json) : node);

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** Errors of `value` against `schema` (subset of draft 2020-12: the keywords this document uses). */
function validate(schema: Json, value: unknown, at = "$"): string[] {
  const errors: string[] = [];
  if (typeof schema.$ref === "string") errors.push(...validate(resolvePointer(schema.$ref) as Json, value, at));
  if (schema.anyOf && !(schema.anyOf as Json[]).some((s) => validate(s, value, at).length === 0))
    errors.push(`${at}: matches no anyOf branch`);
  if (schema.oneOf) {
    const matches = (schema.oneOf as Json[]).filter((s) => validate(s, value, at).length === 0).length;
    if (matches !== 1) errors.push(`${at}: matches ${matches} oneOf branches`);
  }
  for (const s of (schema.allOf as Json[] | undefined) ?? []) errors.push(...validate(s, value, at));
  if (schema.not && validate(schema.not, value, at).length === 0) errors.push(`${at}: matches a schema it must not match`);
  if (schema.type !== undefined) {
    const types = ([] as string[]).concat(schema.type);
    const actual = jsonType(value);
    if (!types.includes(actual) && !(actual === "integer" && types.includes("number")))
      return [...errors, `${at}: is ${actual}, expected ${types.join("|")}`];
  }
  if ("const" in schema && value !== schema.const) errors.push(`${at}: must be ${JSON.stringify(schema.const)}`);
  if (schema.enum && !(schema.enum as unknown[]).includes(value)) errors.push(`${at}: not in enum`);
  if (typeof value === "string") {
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) errors.push(`${at}: does not match ${schema.pattern}`);
    if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(`${at}: too short`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(`${at}: too long`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${at}: below minimum`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${at}: above maximum`);
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(`${at}: too many items`);
    if (schema.items) value.forEach((item, i) => errors.push(...validate(schema.items, item, `${at}[${i}]`)));
  }
  if (jsonType(value) === "object") {
    const obj = value as Json;
    for (const name of (schema.required as string[] | undefined) ?? []) if (!(name in obj)) errors.push(`${at}.${name}: is required`);
    const props = (schema.properties as Json | undefined) ?? {};
    for (const [name, member] of Object.entries(obj)) {
      if (name in props) errors.push(...validate(props[name], member, `${at}.${name}`));
      else if (schema.additionalProperties === false) errors.push(`${at}.${name}: is not allowed`);
    }
  }
  return errors;
}

/** Every operation of the document as [method, path, operation]. */
function documentedOperations(): [string, string, Json][] {
  return Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, op]) => [method, path, op as Json] as [string, string, Json]),
  );
}

const operation = (method: string, path: string): Json | undefined => doc.paths?.[path]?.[method.toLowerCase()];

/** Every node of the document with its JSON path. */
function* walk(node: unknown, at = "#"): Generator<[string, Json]> {
  if (node === null || typeof node !== "object") return;
  yield [at, node as Json];
  for (const [key, child] of Object.entries(node)) yield* walk(child, `${at}/${key}`);
}

/**
 * Sends a request and checks the answer against the document: the status is documented for the operation, the
 * media type matches, and the body validates against the documented schema. Returns the parsed body.
 */
async function conforming(method: string, template: string, url: string, init: { headers?: Record<string, string>; body?: unknown } = {}) {
  const op = operation(method, template);
  expect(op, `${method} ${template} is documented`).toBeDefined();
  const res = await app.request(url, {
    method,
    headers: { ...(init.body === undefined ? {} : { "Content-Type": "application/json" }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const response = op!.responses[String(res.status)];
  expect(response, `${method} ${template} documents status ${res.status}`).toBeDefined();
  const documented = deref(response as Json);
  const text = await res.text();
  if (!documented.content) {
    expect(text).toBe("");
    return { status: res.status, body: undefined, headers: res.headers };
  }
  const [mediaType, media] = Object.entries(documented.content as Json)[0]!;
  expect(res.headers.get("content-type")?.split(";")[0]).toBe(mediaType);
  const body = JSON.parse(text) as Json;
  expect(validate((media as Json).schema, body), `${method} ${url} → ${res.status} conforms`).toEqual([]);
  if (res.status >= 400) expect(documented["x-problem-codes"]).toContain(body.code);
  return { status: res.status, body, headers: res.headers };
}

// ---------------------------------------------------------------------------------------------------------

describe("GET /openapi.json", () => {
  it("answers an OpenAPI 3.1 document as JSON without a token", async () => {
    const res = await app.request("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("x-api-version")).toBe("4");
    const body = (await res.json()) as Json;
    expect(body.openapi).toMatch(/^3\.1\.\d+$/);
    expect(body.info.version).toBe(runtime.config.serviceVersion);
    expect(body.info["x-api-version"]).toBe(4);
    expect(body.info.description).toMatch(/workflow and execution/);
  });

  it("answers the same (cached) document every time", async () => {
    const again = (await (await app.request("/openapi.json")).json()) as Json;
    expect(again).toEqual(doc);
  });

  it.each(routes.map((r) => [`${r.method} ${r.path}`, r] as const))("documents %s with the right security", (_name, route) => {
    const op = operation(route.method, route.path);
    expect(op, `${route.method} ${route.path} is in paths`).toBeDefined();
    if (route.public) {
      expect(op!.security ?? []).toEqual([]);
      expect(op!.responses["401"]).toBeUndefined();
    } else {
      // API.md §21.1: a partner assertion is the alternative where the route accepts one
      expect(op!.security).toEqual(route.partner ? [{ bearerAuth: [] }, { partnerAssertion: [] }] : [{ bearerAuth: [] }]);
      expect(op!.responses["401"]).toBeDefined();
    }
  });

  it("documents no operation that is not a route", () => {
    const mounted = new Set(routes.map((r) => `${r.method} ${r.path}`));
    const documented = documentedOperations().map(([method, path]) => `${method.toUpperCase()} ${path}`);
    expect(documented.filter((op) => !mounted.has(op))).toEqual([]);
    expect(documented).toHaveLength(mounted.size);
  });

  it("declares the bearer scheme and no global security", () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: "JWT" });
    expect(doc.security).toBeUndefined();
  });

  it("has the shared component schemas", () => {
    for (const name of [
      "Wallet",
      "WithdrawResult",
      "SecretMetadata",
      "PageInfo",
      "Problem",
      "FieldError",
      "AuthExchangeRequest",
      "AuthExchangeResponse",
      "Health",
      "Jwks",
    ]) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
    expect(doc.components.schemas.Problem.required).toEqual(["type", "title", "status", "detail", "instance", "code"]);
    expect(Object.keys(doc.components.schemas.Problem.properties)).toEqual(expect.arrayContaining(["errors", "reason", "limit"]));
  });
});

describe("document structure", () => {
  it("resolves every $ref", () => {
    const refs = [...walk(doc)].filter(([, node]) => typeof node.$ref === "string");
    expect(refs.length).toBeGreaterThan(50);
    const broken = refs.filter(([, node]) => resolvePointer(node.$ref) === undefined).map(([at, node]) => `${at} → ${node.$ref}`);
    expect(broken).toEqual([]);
  });

  it("has compilable patterns and required members that exist", () => {
    for (const [at, node] of walk(doc)) {
      if (typeof node.pattern === "string") expect(() => new RegExp(node.pattern, "u"), at).not.toThrow();
      if (Array.isArray(node.required) && node.properties) {
        for (const name of node.required) expect(node.properties, `${at} requires ${name}`).toHaveProperty([name]);
      }
    }
  });

  it("gives every operation a unique operationId, a summary, tags and the common headers", () => {
    const ids = new Set<string>();
    for (const [method, path, op] of documentedOperations()) {
      const where = `${method} ${path}`;
      expect(op.operationId, where).toMatch(/^[a-zA-Z][a-zA-Z0-9]*$/);
      expect(ids.has(op.operationId), `${where}: duplicate operationId`).toBe(false);
      ids.add(op.operationId);
      expect(op.summary, where).toBeTruthy();
      expect(op.tags?.length, where).toBeGreaterThan(0);
      const headers = (op.parameters as Json[])
        .map(deref)
        .filter((p) => p.in === "header")
        .map((p) => p.name);
      expect(headers, where).toEqual(expect.arrayContaining(["X-Api-Version", "X-Request-Id"]));
    }
    expect(operation("POST", "/wallets/{address}:withdraw")!.parameters.map((p: Json) => deref(p).name)).toContain("Idempotency-Key");
  });

  it("declares exactly the path parameters of each template", () => {
    for (const [method, path, op] of documentedOperations()) {
      const inTemplate = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      const params = ((op.parameters ?? []) as Json[]).map(deref);
      const declared = params
        .filter((p) => p.in === "path")
        .map((p) => p.name)
        .sort();
      expect(declared, `${method} ${path}`).toEqual(inTemplate);
      for (const p of params) {
        expect(p.schema, `${method} ${path} ${p.name}`).toBeDefined();
        if (p.in === "path") expect(p.required).toBe(true);
      }
    }
  });

  it("answers errors as problem+json with the Problem schema and success with a documented media type", () => {
    for (const [method, path, op] of documentedOperations()) {
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => s.startsWith("2")),
        `${method} ${path} has a success status`,
      ).toBe(true);
      expect(statuses, `${method} ${path}`).toEqual(expect.arrayContaining(["400", "429", "500"]));
      for (const [status, raw] of Object.entries(op.responses as Json)) {
        const response = deref(raw as Json);
        const where = `${method} ${path} ${status}`;
        expect(response.description, where).toBeTruthy();
        if (Number(status) >= 400) {
          expect(Object.keys(response.content), where).toEqual(["application/problem+json"]);
          const media = response.content["application/problem+json"];
          expect(media.schema, where).toEqual({ $ref: "#/components/schemas/Problem" });
          expect(response["x-problem-codes"]?.length, where).toBeGreaterThan(0);
          for (const example of Object.values(media.examples as Json)) {
            expect(validate(media.schema, example.value), where).toEqual([]);
            expect(example.value.status).toBe(Number(status));
          }
        } else if (status === "204") {
          expect(response.content, where).toBeUndefined();
        } else if (response.content !== undefined) {
          expect(Object.keys(response.content).length, where).toBe(1);
        }
      }
    }
  });

  it("describes request bodies as closed objects", () => {
    for (const [method, path, op] of documentedOperations()) {
      if (!op.requestBody) continue;
      const schema = deref(op.requestBody.content["application/json"].schema);
      expect(schema.type, `${method} ${path}`).toBe("object");
      expect(schema.additionalProperties, `${method} ${path}`).toBe(false);
      expect(op.responses["415"], `${method} ${path}`).toBeDefined();
      expect(op.responses["413"], `${method} ${path}`).toBeDefined();
    }
    // API.md §1.3: exactly these endpoints read a body (those of them that this deployment serves).
    const takesBody = [
      "POST /auth:exchange",
      "PUT /secrets/{name}",
      "POST /wallets",
      "PATCH /wallets/{address}",
      "POST /wallets/{address}:withdraw",
      "POST /workflows",
      "POST /workflows/{id}:trigger",
      "POST /workflows:simulate",
      "POST /workflows:estimateFees",
      "POST /nodes:run",
      "POST /triggers:run",
      "POST /executions/{id}:signal",
    ];
    const served = documentedOperations().map(([m, p]) => `${m.toUpperCase()} ${p}`);
    const bodies = documentedOperations()
      .filter(([, , op]) => op.requestBody)
      .map(([m, p]) => `${m.toUpperCase()} ${p}`);
    expect(bodies.sort()).toEqual(takesBody.filter((route) => served.includes(route)).sort());
    expect(bodies.length).toBeGreaterThanOrEqual(6);
  });

  it("accepts null for optional body members and rejects unknown ones (derived request schemas)", () => {
    const create = doc.components.schemas.WalletCreateRequest;
    expect(validate(create, { salt: "1", factoryAddress: null, chainId: 0 })).toEqual([]);
    expect(validate(create, { salt: "01" })).not.toEqual([]);
    expect(validate(create, { salt: "1", extra: true })).not.toEqual([]);
    expect(validate(create, {})).not.toEqual([]);
    const put = doc.components.schemas.SecretPutRequest;
    expect(validate(put, { value: "x", workflowId: "01jd7q0s7w3c2y8k5n6m4p1r9t" })).toEqual([]);
    expect(validate(put, { value: "" })).not.toEqual([]);
    expect(validate(doc.components.schemas.WalletUpdateRequest, {})).toEqual([]);
    expect(
      validate(doc.components.schemas.WithdrawRequest, { recipientAddress: "0x" + "1".repeat(40), amount: "max", token: "ETH" }),
    ).toEqual([]);
    expect(
      validate(doc.components.schemas.WithdrawRequest, { recipientAddress: "0x" + "1".repeat(40), amount: "0", token: "ETH" }),
    ).not.toEqual([]);
  });
});

describe("GET /docs", () => {
  it("answers an HTML reference without a token that points at /openapi.json and lists every operation", async () => {
    const res = await app.request("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain("/openapi.json");
    for (const route of routes) expect(html).toContain(`${route.method} ${route.path}`);
  });
});

describe("the service conforms to the document", () => {
  let alice: SignedIn;
  beforeAll(async () => {
    alice = await signIn(app);
  });

  it("public routes", async () => {
    expect((await conforming("GET", "/health", "/health")).status).toBe(200);
    expect((await conforming("GET", "/.well-known/jwks.json", "/.well-known/jwks.json")).status).toBe(200);

    const account = privateKeyToAccount(generatePrivateKey());
    const message = buildAuthMessage(messageDefaults(account.address));
    const exchange = { ownerAddress: account.address, signature: await account.signMessage({ message }), message };
    expect(validate(doc.components.schemas.AuthExchangeRequest, exchange)).toEqual([]);
    expect(
      (await conforming("POST", "/auth:exchange", "/auth:exchange", { body: exchange, headers: { "X-Forwarded-For": "198.51.100.7" } }))
        .status,
    ).toBe(200);
    const bad = await conforming("POST", "/auth:exchange", "/auth:exchange", { body: { ...exchange, ownerAddress: "nope" } });
    expect(bad.body?.code).toBe("AUTH_INVALID_ADDRESS");
    const version = await conforming("GET", "/health", "/health", { headers: { "X-Api-Version": "3" } });
    expect(version.body?.code).toBe("UNSUPPORTED_API_VERSION");
  });

  it("secrets", async () => {
    const h = alice.headers;
    expect((await conforming("GET", "/secrets", "/secrets")).status).toBe(401);
    expect((await conforming("PUT", "/secrets/{name}", "/secrets/API_KEY", { headers: h, body: { value: "s3cret" } })).status).toBe(201);
    expect(
      (await conforming("PUT", "/secrets/{name}", "/secrets/API_KEY", { headers: h, body: { value: "other", workflowId: null } })).status,
    ).toBe(204);
    const page = await conforming("GET", "/secrets", "/secrets?limit=1", { headers: h });
    expect(page.body?.data).toHaveLength(1);
    expect((await conforming("GET", "/secrets", "/secrets?limit=0", { headers: h })).body?.code).toBe("VALIDATION_FAILED");
    expect((await conforming("PUT", "/secrets/{name}", "/secrets/ap_x", { headers: h, body: { value: "v" } })).body?.code).toBe(
      "SECRET_NAME_RESERVED",
    );
    expect((await conforming("DELETE", "/secrets/{name}", "/secrets/API_KEY", { headers: h })).status).toBe(204);
  });

  it("wallets", async () => {
    const h = alice.headers;
    const created = await conforming("POST", "/wallets", "/wallets", { headers: h, body: { salt: "7" } });
    expect(created.status).toBe(201);
    expect((await conforming("POST", "/wallets", "/wallets", { headers: h, body: { salt: "7" } })).status).toBe(200);
    const address = created.body!.address as string;
    expect((await conforming("GET", "/wallets", "/wallets?includeHidden=true", { headers: h })).body?.data).toHaveLength(1);
    expect(
      (await conforming("PATCH", "/wallets/{address}", `/wallets/${address}`, { headers: h, body: { isHidden: true } })).body?.isHidden,
    ).toBe(true);
    expect((await conforming("GET", "/wallets/{address}:getNonce", `/wallets/${address}:getNonce`, { headers: h })).body?.nonce).toBe("0");
    const withdrawals = await conforming("GET", "/wallets/{address}/withdrawals", `/wallets/${address}/withdrawals?status=pending,failed`, {
      headers: h,
    });
    expect(withdrawals.body).toEqual({ data: [], pageInfo: { hasNextPage: false, hasPreviousPage: false } });
    const missing = await conforming(
      "GET",
      "/wallets/{address}/withdrawals/{id}",
      `/wallets/${address}/withdrawals/01JD7Q0S7W3C2Y8K5N6M4P1R9T`,
      { headers: h },
    );
    expect(missing.body?.code).toBe("WITHDRAWAL_NOT_FOUND");
    const badWithdraw = await conforming("POST", "/wallets/{address}:withdraw", `/wallets/${address}:withdraw`, {
      headers: h,
      body: { amount: "1", token: "ETH" },
    });
    expect(badWithdraw.body?.code).toBe("WITHDRAW_MISSING_FIELDS");
    const unsupported = await conforming("POST", "/wallets", "/wallets", {
      headers: { ...h, "Content-Type": "text/plain" },
      body: { salt: "1" },
    });
    expect(unsupported.status).toBe(415);
  });

  it("tokens", async () => {
    const h = alice.headers;
    const native = await conforming("GET", "/tokens/{address}", "/tokens/0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", { headers: h });
    expect(native.body).toMatchObject({ found: true, source: "native" });
    const nobody = privateKeyToAccount(generatePrivateKey()).address;
    expect((await conforming("GET", "/tokens/{address}", `/tokens/${nobody}`, { headers: h })).body).toMatchObject({ found: false });
    expect((await conforming("GET", "/tokens/{address}", "/tokens/0x12", { headers: h })).body?.errors[0].path).toBe("path.address");
    expect((await conforming("GET", "/tokens/{address}", `/tokens/${nobody}?chainId=999999`, { headers: h })).body?.code).toBe(
      "UNSUPPORTED_CHAIN",
    );
  });

  it("running one node or one trigger (API.md §17.2, §17.3)", async () => {
    const h = alice.headers;
    const node = { id: "c", name: "c", type: "customCode", config: { source: "return { ok: true }" } };
    const ran = await conforming("POST", "/nodes:run", "/nodes:run", { headers: h, body: { node, inputVariables: { x: 1 } } });
    expect(ran.body).toMatchObject({ success: true, output: { data: { ok: true } } });
    const failed = await conforming("POST", "/nodes:run", "/nodes:run", {
      headers: h,
      body: { node: { ...node, config: { source: "throw new Error('no')" } } },
    });
    expect(failed.body).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR" });
    expect((await conforming("POST", "/nodes:run", "/nodes:run", { headers: h, body: {} })).body?.code).toBe("VALIDATION_FAILED");
    expect((await conforming("POST", "/nodes:run", "/nodes:run", { headers: h, body: { node, chainId: 999_999 } })).body?.code).toBe(
      "UNSUPPORTED_CHAIN",
    );

    const manual = { id: "m", name: "m", type: "manual", config: { data: { a: 1 } } };
    expect((await conforming("POST", "/triggers:run", "/triggers:run", { headers: h, body: { trigger: manual } })).body?.success).toBe(
      true,
    );
    const cron = await conforming("POST", "/triggers:run", "/triggers:run", {
      headers: h,
      body: { trigger: { id: "c", name: "c", type: "cron", config: { schedules: ["0 0 * * *"] } } },
    });
    expect(cron.body?.nextFires).toHaveLength(5);
    const often = await conforming("POST", "/triggers:run", "/triggers:run", {
      headers: h,
      body: { trigger: { id: "c", name: "c", type: "cron", config: { schedules: ["* * * * *"] } } },
    });
    expect(often.body?.code).toBe("TRIGGER_TOO_FREQUENT");
  });
});

describe("the document says what the server does (issue 18 item 5)", () => {
  const bodyOperations = () => documentedOperations().filter(([, , op]) => op.requestBody);
  const WALLET = "0x" + "1".repeat(40);
  const ULID = "01JD7Q0S7W3C2Y8K5N6M4P1R9T";
  const urlOf = (path: string) =>
    path.replace("{address}", WALLET).replace("{id}", ULID).replace("{name}", "API_KEY").replace("{workflow_id}", ULID);

  it("marks a request body required exactly when an empty body (read as {}) fails validation", async () => {
    const alice = await signIn(app);
    const answers: Record<string, boolean> = {};
    for (const [method, path, op] of bodyOperations()) {
      // Well-formed path values, no body: field validation (400) comes before any record lookup (404).
      const res = await app.request(urlOf(path), { method: method.toUpperCase(), headers: { ...alice.headers, "Idempotency-Key": "k-1" } });
      const problem = (await res.json()) as Json;
      const bodyRefused =
        res.status === 400 &&
        (problem.code !== "VALIDATION_FAILED" || (problem.errors as Json[]).some((e) => String(e.path).startsWith("body")));
      expect(op.requestBody.required, `${method} ${path}: ${res.status} ${problem.code}`).toBe(bodyRefused);
      answers[`${method.toUpperCase()} ${path}`] = op.requestBody.required;
    }
    expect(answers["POST /workflows"]).toBe(true);
    expect(answers["PATCH /wallets/{address}"]).toBe(false);
    expect(Object.values(answers).filter(Boolean).length).toBeGreaterThanOrEqual(5);
  });

  it.each([
    ["Node", () => kinds.nodeTypes, "Node"],
    ["Trigger", () => kinds.triggerTypes, "Trigger"],
  ] as const)("describes %s as a oneOf of named kinds with a discriminator on type", (name, types, suffix) => {
    const union = doc.components.schemas[name];
    const expected = types().map((type) => [type, `#/components/schemas/${type.replace(/^./, (c) => c.toUpperCase())}${suffix}`]);
    expect(union.discriminator).toEqual({ propertyName: "type", mapping: Object.fromEntries(expected) });
    expect(union.oneOf).toEqual(expected.map(([, ref]) => ({ $ref: ref })));
    expect(union.anyOf).toBeUndefined();
    for (const [type, ref] of expected) {
      const variant = resolvePointer(ref!) as Json;
      expect(variant.required, ref).toContain("type");
      expect(variant.properties.type, ref).toEqual({ const: type });
    }
  });

  it("describes the stream as text/event-stream whose schema is one event", () => {
    const ok = operation("GET", "/executions/{id}:stream")!.responses["200"];
    expect(Object.keys(ok.content)).toEqual(["text/event-stream"]);
    expect(ok.content["text/event-stream"].schema).toEqual({ $ref: "#/components/schemas/ExecutionStatusEvent" });
    const event = doc.components.schemas.ExecutionStatusEvent;
    expect(event.required).toEqual(["id", "event", "data"]);
    expect(event.properties.data.$ref).toBe("#/components/schemas/ExecutionStatusSummary");
    const summary = { id: ULID, workflowId: ULID, status: "pending", startAt: 1_700_000_000_000 };
    expect(validate(event, { id: "1", event: "status", data: summary })).toEqual([]);
    expect(validate(event, { id: "0", event: "status", data: summary })).not.toEqual([]);
    expect(validate(event, { id: "2", event: "other", data: summary })).not.toEqual([]);
  });

  it("repeats null in no union and has no branch that accepts anything", () => {
    const problems: string[] = [];
    for (const [at, node] of walk(doc)) {
      if (Array.isArray(node.type) && new Set(node.type).size !== node.type.length) problems.push(`${at}: type ${node.type}`);
      for (const keyword of ["anyOf", "oneOf"]) {
        const branches = node[keyword];
        if (!Array.isArray(branches)) continue;
        const texts = branches.map((b) => JSON.stringify(b));
        if (new Set(texts).size !== texts.length) problems.push(`${at}: ${keyword} repeats a branch`);
        const nulls = branches.filter((b: Json) => b.type === "null" || (Array.isArray(b.type) && b.type.includes("null")));
        if (nulls.length > 1) problems.push(`${at}: ${keyword} has ${nulls.length} null branches`);
        if (branches.some((b: Json) => Object.keys(b).every((k) => k === "description" || k.startsWith("x-"))))
          problems.push(`${at}: ${keyword} has a branch that accepts anything`);
      }
    }
    expect(problems).toEqual([]);
    // An optional member of a request accepts null once, whatever its shape.
    const create = doc.components.schemas.WorkflowCreateRequest;
    expect(validate(create.properties.chainId, null)).toEqual([]);
    expect(create.properties.chainId.anyOf.filter((b: Json) => b.type === "null")).toHaveLength(1);
  });

  it("documents the stream interval as exactly the values the server accepts (100 to 5000 ms)", () => {
    const schema = deref(doc.components.parameters.StreamInterval).schema as Json;
    const accepted = (text: string) => v.safeParse(Interval, text).success;
    // A query value is text: the integer branch reads canonical digits, the string branch any accepted spelling.
    const documented = (text: string) =>
      validate(schema, text).length === 0 || (/^(0|[1-9][0-9]*)$/.test(text) && validate(schema, Number(text)).length === 0);
    const samples = new Set<string>(["", "ms", "s", "1.s", ".5s", "-100", "100.5", "1e3", "250 ", "0x100", "5000.0ms"]);
    for (let n = 0; n <= 6000; n += n < 200 || (n > 4900 && n < 5100) ? 1 : 7) {
      for (const digits of [String(n), String(n).padStart(4, "0"), String(n).padStart(7, "0"), String(n).padStart(8, "0")]) {
        samples.add(digits);
        samples.add(`${digits}ms`);
      }
      const seconds = n / 1000;
      for (const text of [String(seconds), seconds.toFixed(1), seconds.toFixed(3), seconds.toFixed(4), `000${seconds.toFixed(2)}`])
        samples.add(`${text}s`);
    }
    const disagree = [...samples].filter((text) => accepted(text) !== documented(text));
    expect(disagree).toEqual([]);
    expect(accepted("100") && accepted("5s") && !accepted("99") && !accepted("5001ms")).toBe(true);
  });

  it("states the rules a schema keyword can express", () => {
    const source = doc.components.schemas.CustomCodeNode.properties.config.properties.source;
    expect(source).toMatchObject({ type: "string", minLength: 1 });
    expect(validate(source, "")).not.toEqual([]);
    const expression = doc.components.schemas.BranchNode.properties.config.properties.conditions;
    expect(JSON.stringify(expression)).toContain('"maxLength":4096');
    const filter = doc.components.schemas.FilterNode.properties.config.properties.expression;
    expect(filter.pattern).toBe("\\S");
    expect(validate(filter, " \n\t")).not.toEqual([]);
    expect(validate(filter, " value > 1 ")).toEqual([]);
    expect(validate(doc.components.schemas.AuthExchangeRequest.properties.ownerAddress, "0x" + "0".repeat(40))).not.toEqual([]);
    expect(validate(doc.components.schemas.SecretPutRequest, { value: "v", orgId: null })).toEqual([]);
    expect(validate(doc.components.schemas.SecretPutRequest, { value: "v", orgId: "org" })).not.toEqual([]);
    const destination = doc.components.schemas.EthTransferNode.properties.config.properties.destination;
    expect(destination.not).toEqual({ const: "0x" + "0".repeat(40) });
    expect(validate(destination, "0x" + "1".repeat(40))).toEqual([]);
  });
});
