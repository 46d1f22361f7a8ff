/**
 * Secrets API (API.md §12) over HTTP against DynamoDB Local and the local KMS endpoint.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import { ulid } from "ulid";
import { DecryptCommand } from "@aws-sdk/client-kms";
import { GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime, stackEnv } from "../support/runtime";
import { insertWorkflow } from "../support/fixtures";
import { createApp } from "../../shared/http/app";
import { encodeCursor } from "../../shared/http/paging";
import { issueToken } from "../../shared/http/token";
import { buildConfig } from "../../shared/config";
import { createRuntime } from "../../shared/runtime";
import { useKms } from "../../shared/envelope/kms";
import { Keys } from "../../shared/store/item-keys";
import { setLogLevel } from "../../shared/log";
import { open } from "../../shared/envelope/envelope";
import * as Secret from "../../shared/secret/secret";
import { secretRoutes } from "../../shared/secret/routes";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

type Owner = `0x${string}`;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const CHAIN_ID = 31337;
let runtime: Runtime;
let clock = Date.now();
const app = createApp(secretRoutes);
const tokens = new Map<string, string>();

const newOwner = (): Owner => getAddress(`0x${randomBytes(20).toString("hex")}`);

async function headers(owner: Owner, extra: Record<string, string> = {}) {
  let token = tokens.get(owner);
  if (!token) {
    token = await issueToken(owner, CHAIN_ID, Date.now() + 24 * 3600_000);
    tokens.set(owner, token);
  }
  return { Authorization: `Bearer ${token}`, ...extra };
}

async function put(owner: Owner, name: string, body: unknown, init: { contentType?: string; raw?: string } = {}) {
  return app.request(`/secrets/${name}`, {
    method: "PUT",
    headers: await headers(owner, { "Content-Type": init.contentType ?? "application/json" }),
    body: init.raw ?? JSON.stringify(body),
  });
}

async function list(owner: Owner, query = "") {
  return app.request(`/secrets${query ? `?${query}` : ""}`, { headers: await headers(owner) });
}

async function listJson(owner: Owner, query = "") {
  const res = await list(owner, query);
  expect(res.status).toBe(200);
  return (await res.json()) as { data: Json[]; pageInfo: Json };
}

async function del(owner: Owner, name: string, query = "") {
  return app.request(`/secrets/${name}${query ? `?${query}` : ""}`, { method: "DELETE", headers: await headers(owner) });
}

async function problem(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Json;
  expect(body.code).toBe(code);
  return body;
}

async function expectNoBody(res: Response, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBeNull();
  expect(await res.text()).toBe("");
}

async function rawItem(owner: Owner, name: string, workflowId?: string) {
  const { Item } = await runtime.db.send(
    new GetCommand({ TableName: runtime.config.tableName, Key: Keys.secret(owner, name, workflowId) }),
  );
  return Item;
}

async function counter(owner: Owner) {
  const { Item } = await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: Keys.counter(owner, "secrets") }));
  return Item?.count as number | undefined;
}

async function storedSecretCount(owner: Owner) {
  const out = await runtime.db.send(
    new QueryCommand({
      TableName: runtime.config.tableName,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :p)",
      ExpressionAttributeValues: { ":pk": Keys.owner(owner), ":p": Keys.secretPrefix },
    }),
  );
  return out.Items?.length ?? 0;
}

beforeAll(async () => {
  runtime = await useTestRuntime({ RATE_LIMIT_BURST: "1000000", RATE_LIMIT_RPS: "1000000" });
  runtime.now = () => clock;
});

afterEach(() => {
  clock = Date.now();
});

describe("PUT /secrets/{name}", () => {
  it("creates with 201, replaces with 204 (no bodies), keeps createdAt and moves updatedAt", async () => {
    const owner = newOwner();
    const t0 = clock;
    await expectNoBody(await put(owner, "API_KEY", { value: "first" }), 201);
    clock = t0 + 60_000;
    await expectNoBody(await put(owner, "API_KEY", { value: "second" }), 204);
    const { data } = await listJson(owner);
    expect(data).toEqual([{ name: "API_KEY", scope: "user", createdAt: t0, updatedAt: t0 + 60_000 }]);
    expect(await Secret.resolveForExecution(owner, undefined, ["API_KEY"])).toEqual({ API_KEY: "second" });
    expect(await counter(owner)).toBe(1);
  });

  it("requires a token (401 AUTH_REQUIRED)", async () => {
    const res = await app.request("/secrets/X", { method: "PUT", headers: { "Content-Type": "application/json" }, body: '{"value":"v"}' });
    await problem(res, 401, "AUTH_REQUIRED");
  });

  it("checks the name pattern (400 VALIDATION_FAILED at path.name)", async () => {
    const owner = newOwner();
    for (const name of ["1abc", "a-b", "a.b", "%C3%A9", "a".repeat(129)]) {
      const body = await problem(await put(owner, name, { value: "v" }), 400, "VALIDATION_FAILED");
      expect(body.errors).toEqual([{ path: "path.name", message: expect.any(String) }]);
    }
    for (const name of ["a", "_", "_private", "Z9_", "a".repeat(128), "apx", "_ap_x", "a_p_"]) {
      expect((await put(owner, name, { value: "v" })).status).toBe(201);
    }
  });

  it("rejects names starting with ap_ in any letter case (400 SECRET_NAME_RESERVED)", async () => {
    const owner = newOwner();
    for (const name of ["ap_", "ap_key", "AP_KEY", "Ap_x", "aP_x"]) {
      const body = await problem(await put(owner, name, { value: "v" }), 400, "SECRET_NAME_RESERVED");
      expect(body.errors[0].path).toBe("path.name");
    }
    expect(await storedSecretCount(owner)).toBe(0);
  });

  it("limits the value to 1..32768 bytes of UTF-8, counting multibyte characters in bytes", async () => {
    const owner = newOwner();
    const fails = async (value: unknown) => {
      const body = await problem(await put(owner, "V", { value }), 400, "VALIDATION_FAILED");
      expect(body.errors).toEqual([{ path: "body.value", message: expect.any(String) }]);
    };
    await fails("");
    await fails("a".repeat(32_769));
    await fails("é".repeat(16_384) + "a"); // 32,769 bytes in 16,385 characters
    await fails("€".repeat(10_923)); // 32,769 bytes in 10,923 characters
    await fails("😀".repeat(8_192) + "a"); // 32,769 bytes
    await fails("\ud800"); // a lone surrogate is not UTF-8
    expect((await put(owner, "V", { value: "a".repeat(32_768) })).status).toBe(201);
    expect((await put(owner, "V", { value: "é".repeat(16_384) })).status).toBe(204);
    expect((await put(owner, "V", { value: "😀".repeat(8_192) })).status).toBe(204);
    expect((await put(owner, "V", { value: "x" })).status).toBe(204);
    expect(await Secret.resolveForExecution(owner, undefined, ["V"])).toEqual({ V: "x" });
  });

  it("requires value to be a string and never echoes a rejected value", async () => {
    const owner = newOwner();
    let body = await problem(await put(owner, "V", {}), 400, "VALIDATION_FAILED");
    expect(body.errors).toEqual([{ path: "body.value", message: "is required" }]);
    body = await problem(await put(owner, "V", { value: 987654321987 }), 400, "VALIDATION_FAILED");
    expect(JSON.stringify(body)).not.toContain("987654321987");
    body = await problem(await put(owner, "V", { value: ["s3cr3t-in-array"] }), 400, "VALIDATION_FAILED");
    expect(JSON.stringify(body)).not.toContain("s3cr3t-in-array");
    // An empty body reads as {} and then fails validation.
    const empty = await app.request("/secrets/V", { method: "PUT", headers: await headers(owner) });
    await problem(empty, 400, "VALIDATION_FAILED");
  });

  it("rejects unknown body members (400 VALIDATION_FAILED naming each)", async () => {
    const owner = newOwner();
    const body = await problem(await put(owner, "V", { value: "v", scope: "user", extra: 1 }), 400, "VALIDATION_FAILED");
    expect(body.errors.map((e: Json) => e.path).sort()).toEqual(["body.extra", "body.scope"]);
  });

  it("answers 415 for a non-JSON content type and 400 INVALID_JSON for bad JSON or a non-object", async () => {
    const owner = newOwner();
    await problem(await put(owner, "V", null, { contentType: "text/plain", raw: '{"value":"v"}' }), 415, "UNSUPPORTED_MEDIA_TYPE");
    await problem(await put(owner, "V", null, { raw: '{"value":' }), 400, "INVALID_JSON");
    await problem(await put(owner, "V", null, { raw: '["v"]' }), 400, "INVALID_JSON");
    expect((await put(owner, "V", null, { contentType: "application/json; charset=utf-8", raw: '{"value":"v"}' })).status).toBe(201);
  });

  it("rejects orgId with 400 SECRET_SCOPE_UNSUPPORTED; orgId null is absent", async () => {
    const owner = newOwner();
    for (const orgId of ["org-1", "", 5, {}]) {
      const body = await problem(await put(owner, "V", { value: "v", orgId }), 400, "SECRET_SCOPE_UNSUPPORTED");
      expect(body.errors).toEqual([{ path: "body.orgId", message: expect.any(String) }]);
    }
    expect(await storedSecretCount(owner)).toBe(0);
    expect((await put(owner, "V", { value: "v", orgId: null })).status).toBe(201);
  });

  it("reports field problems in the order of §1.6/§12.2", async () => {
    const owner = newOwner();
    // A malformed name and a bad value: one VALIDATION_FAILED listing both.
    let body = await problem(await put(owner, "1x", { value: "" }), 400, "VALIDATION_FAILED");
    expect(body.errors.map((e: Json) => e.path)).toEqual(["path.name", "body.value"]);
    // A reserved name comes before body problems; body problems before orgId.
    await problem(await put(owner, "ap_x", { value: "", orgId: "o" }), 400, "SECRET_NAME_RESERVED");
    body = await problem(await put(owner, "X", { value: "", orgId: "o" }), 400, "VALIDATION_FAILED");
    expect(body.errors.map((e: Json) => e.path)).toEqual(["body.value"]);
    // Field validation before the workflow lookup.
    await problem(await put(owner, "X", { value: "", workflowId: ulid() }), 400, "VALIDATION_FAILED");
  });

  it("workflow scope: a malformed workflowId is 400, an unknown or foreign one 404 WORKFLOW_NOT_FOUND with the same body", async () => {
    const owner = newOwner();
    const other = newOwner();
    const foreign = await insertWorkflow(other);
    const bad = await problem(await put(owner, "V", { value: "v", workflowId: "not-a-ulid" }), 400, "VALIDATION_FAILED");
    expect(bad.errors).toEqual([{ path: "body.workflowId", message: "must be a ULID" }]);
    const unknown = await problem(await put(owner, "V", { value: "v", workflowId: ulid() }), 404, "WORKFLOW_NOT_FOUND");
    const notMine = await problem(await put(owner, "V", { value: "v", workflowId: foreign }), 404, "WORKFLOW_NOT_FOUND");
    expect(notMine.detail).toBe(unknown.detail);
    expect(await storedSecretCount(owner)).toBe(0);
    expect(await storedSecretCount(other)).toBe(0);
  });

  it("workflow scope: a lowercase workflowId is accepted and stored upper-cased; user and workflow scope share a name", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    expect((await put(owner, "TOKEN", { value: "user-value" })).status).toBe(201);
    expect((await put(owner, "TOKEN", { value: "wf-value", workflowId: wf.toLowerCase() })).status).toBe(201);
    expect((await put(owner, "TOKEN", { value: "wf-value-2", workflowId: wf })).status).toBe(204);
    const { data } = await listJson(owner);
    expect(data.map((d) => [d.name, d.scope, d.workflowId])).toEqual([
      ["TOKEN", "user", undefined],
      ["TOKEN", "workflow", wf],
    ]);
    expect(data[0]).not.toHaveProperty("workflowId");
    expect(await counter(owner)).toBe(2);
    const item = await rawItem(owner, "TOKEN", wf);
    expect(item).toMatchObject({ type: "secret", v: 1, scope: "workflow", workflowId: wf, ...Keys.secretByWorkflow(owner, wf, "TOKEN") });
  });
});

describe("GET /secrets", () => {
  it("returns metadata only; the value appears nowhere in the response", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    const value = "super-secret-value-4711";
    await put(owner, "A", { value });
    await put(owner, "B", { value, workflowId: wf });
    for (const query of ["", `workflowId=${wf}`]) {
      const res = await list(owner, query);
      expect(res.status).toBe(200);
      expect(res.headers.get("cache-control")).toBe("no-store");
      const text = await res.text();
      expect(text).not.toContain(value);
      expect(text).not.toContain(Buffer.from(value).toString("base64"));
      const body = JSON.parse(text) as { data: Json[] };
      for (const element of body.data) {
        expect(Object.keys(element).sort()).toEqual(
          element.scope === "workflow"
            ? ["createdAt", "name", "scope", "updatedAt", "workflowId"]
            : ["createdAt", "name", "scope", "updatedAt"],
        );
      }
    }
  });

  it("orders by name in byte order, user scope first, then workflowId ascending", async () => {
    const owner = newOwner();
    const wfs = [await insertWorkflow(owner), await insertWorkflow(owner)].sort();
    const [wfLow, wfHigh] = [wfs[0]!, wfs[1]!];
    await put(owner, "b", { value: "v" });
    await put(owner, "a_b", { value: "v", workflowId: wfHigh });
    await put(owner, "a_b", { value: "v", workflowId: wfLow });
    await put(owner, "a_b", { value: "v" });
    await put(owner, "a", { value: "v" });
    await put(owner, "B", { value: "v" });
    await put(owner, "_x", { value: "v" });
    await put(owner, "a0", { value: "v" });
    const { data, pageInfo } = await listJson(owner);
    expect(data.map((d) => `${d.name}/${d.workflowId ?? "user"}`)).toEqual([
      "B/user",
      "_x/user",
      "a/user",
      "a0/user",
      "a_b/user",
      `a_b/${wfLow}`,
      `a_b/${wfHigh}`,
      "b/user",
    ]);
    expect(pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
  });

  it("pages with limit, after and before; hasNextPage/hasPreviousPage follow §3", async () => {
    const owner = newOwner();
    const names = ["N1", "N2", "N3", "N4", "N5"];
    for (const n of names) await put(owner, n, { value: "v" });

    const p1 = await listJson(owner, "limit=2");
    expect(p1.data.map((d) => d.name)).toEqual(["N1", "N2"]);
    expect(p1.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const p2 = await listJson(owner, `limit=2&after=${p1.pageInfo.endCursor}`);
    expect(p2.data.map((d) => d.name)).toEqual(["N3", "N4"]);
    expect(p2.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const p3 = await listJson(owner, `limit=2&after=${p2.pageInfo.endCursor}`);
    expect(p3.data.map((d) => d.name)).toEqual(["N5"]);
    expect(p3.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    expect(p3.pageInfo.startCursor).toBe(p3.pageInfo.endCursor);

    // Past the end: empty page, no cursors; the cursor's item counts as before the page.
    const end = await listJson(owner, `limit=2&after=${p3.pageInfo.endCursor}`);
    expect(end.data).toEqual([]);
    expect(end.pageInfo).toEqual({ hasNextPage: false, hasPreviousPage: true });

    // before: the items immediately before, in list order.
    const back = await listJson(owner, `limit=2&before=${p3.pageInfo.startCursor}`);
    expect(back.data.map((d) => d.name)).toEqual(["N3", "N4"]);
    expect(back.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const first = await listJson(owner, `limit=2&before=${back.pageInfo.startCursor}`);
    expect(first.data.map((d) => d.name)).toEqual(["N1", "N2"]);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const none = await listJson(owner, `limit=2&before=${first.pageInfo.startCursor}`);
    expect(none.data).toEqual([]);
    expect(none.pageInfo).toEqual({ hasNextPage: true, hasPreviousPage: false });

    // A cursor stays usable after its item is deleted.
    expect((await del(owner, "N2")).status).toBe(204);
    const afterDeleted = await listJson(owner, `limit=2&after=${p1.pageInfo.endCursor}`);
    expect(afterDeleted.data.map((d) => d.name)).toEqual(["N3", "N4"]);
    expect(afterDeleted.pageInfo.hasPreviousPage).toBe(true);

    // Default limit 20 covers everything.
    expect((await listJson(owner)).data).toHaveLength(4);
  });

  it("rejects bad paging parameters (400 VALIDATION_FAILED) and foreign or undecodable cursors (400 INVALID_CURSOR)", async () => {
    const owner = newOwner();
    const other = newOwner();
    await put(owner, "A", { value: "v" });
    await put(other, "A", { value: "v" });
    for (const limit of ["0", "201", "-1", "1.5", "abc", ""]) {
      const body = await problem(await list(owner, `limit=${limit}`), 400, "VALIDATION_FAILED");
      expect(body.errors[0].path).toBe("query.limit");
    }
    expect((await listJson(owner, "limit=200")).data).toHaveLength(1);
    const mine = (await listJson(owner)).pageInfo.startCursor as string;
    await problem(await list(owner, `after=${mine}&before=${mine}`), 400, "VALIDATION_FAILED");
    const theirs = (await listJson(other)).pageInfo.startCursor as string;
    await problem(await list(owner, `after=${theirs}`), 400, "INVALID_CURSOR");
    await problem(await list(owner, `before=${theirs}`), 400, "INVALID_CURSOR");
    await problem(await list(owner, "after=not-a-cursor"), 400, "INVALID_CURSOR");
    await problem(await list(owner, `after=${encodeCursor("GET /workflows", owner, "SECRET#A#0")}`), 400, "INVALID_CURSOR");
    // Bound to this endpoint and caller but naming no secret position: cannot reach other items of the partition.
    await problem(await list(owner, `after=${encodeCursor("GET /secrets", owner, "COUNTER#")}`), 400, "INVALID_CURSOR");
  });

  it("filters by workflowId through the per-workflow index, paging with the same cursors", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    const otherWf = await insertWorkflow(owner);
    await put(owner, "A", { value: "v" });
    await put(owner, "A", { value: "v", workflowId: wf });
    await put(owner, "B", { value: "v", workflowId: otherWf });
    await put(owner, "C", { value: "v", workflowId: wf });
    await put(owner, "D", { value: "v", workflowId: wf });

    const all = await listJson(owner, `workflowId=${wf}`);
    expect(all.data.map((d) => `${d.name}/${d.workflowId}`)).toEqual([`A/${wf}`, `C/${wf}`, `D/${wf}`]);
    const p1 = await listJson(owner, `workflowId=${wf.toLowerCase()}&limit=1`);
    expect(p1.data.map((d) => d.name)).toEqual(["A"]);
    expect(p1.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const p2 = await listJson(owner, `workflowId=${wf}&limit=1&after=${p1.pageInfo.endCursor}`);
    expect(p2.data.map((d) => d.name)).toEqual(["C"]);
    expect(p2.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });

    // A cursor of the unfiltered list positions the filtered one (filters may change between pages).
    const unfiltered = await listJson(owner, "limit=1");
    expect(unfiltered.data.map((d) => `${d.name}/${d.scope}`)).toEqual(["A/user"]);
    const switched = await listJson(owner, `workflowId=${wf}&after=${unfiltered.pageInfo.endCursor}`);
    expect(switched.data.map((d) => d.name)).toEqual(["A", "C", "D"]);
    expect(switched.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });

    const empty = await listJson(owner, `workflowId=${await insertWorkflow(owner)}`);
    expect(empty).toEqual({ data: [], pageInfo: { hasNextPage: false, hasPreviousPage: false } });
  });

  it("workflowId filter: malformed 400, unknown or foreign 404 WORKFLOW_NOT_FOUND", async () => {
    const owner = newOwner();
    const other = newOwner();
    const foreign = await insertWorkflow(other);
    await put(other, "S", { value: "v", workflowId: foreign });
    const bad = await problem(await list(owner, "workflowId=xyz"), 400, "VALIDATION_FAILED");
    expect(bad.errors).toEqual([{ path: "query.workflowId", message: "must be a ULID" }]);
    const unknown = await problem(await list(owner, `workflowId=${ulid()}`), 404, "WORKFLOW_NOT_FOUND");
    const notMine = await problem(await list(owner, `workflowId=${foreign}`), 404, "WORKFLOW_NOT_FOUND");
    expect(notMine.detail).toBe(unknown.detail);
  });

  it("rejects orgId with 400 SECRET_SCOPE_UNSUPPORTED (after workflowId format, before paging)", async () => {
    const owner = newOwner();
    const body = await problem(await list(owner, "orgId=acme"), 400, "SECRET_SCOPE_UNSUPPORTED");
    expect(body.errors).toEqual([{ path: "query.orgId", message: expect.any(String) }]);
    await problem(await list(owner, "orgId="), 400, "SECRET_SCOPE_UNSUPPORTED");
    await problem(await list(owner, "orgId=acme&limit=0"), 400, "SECRET_SCOPE_UNSUPPORTED");
    await problem(await list(owner, "orgId=acme&workflowId=bad"), 400, "VALIDATION_FAILED");
    await problem(await list(owner, `orgId=acme&workflowId=${ulid()}`), 400, "SECRET_SCOPE_UNSUPPORTED");
  });
});

describe("DELETE /secrets/{name}", () => {
  it("answers 204 whether or not something was deleted, and frees the slot", async () => {
    const owner = newOwner();
    await put(owner, "GONE", { value: "v" });
    expect(await counter(owner)).toBe(1);
    await expectNoBody(await del(owner, "GONE"), 204);
    expect(await rawItem(owner, "GONE")).toBeUndefined();
    expect(await counter(owner)).toBe(0);
    await expectNoBody(await del(owner, "GONE"), 204);
    await expectNoBody(await del(owner, "NEVER_EXISTED"), 204);
    await expectNoBody(await del(owner, "ap_reserved"), 204);
    expect(await counter(owner)).toBe(0);
  });

  it("deletes only the selected scope: user scope without workflowId, that workflow's with it", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    await put(owner, "K", { value: "user" });
    await put(owner, "K", { value: "wf", workflowId: wf });
    await expectNoBody(await del(owner, "K", `workflowId=${ulid()}`), 204);
    expect((await listJson(owner)).data).toHaveLength(2);
    await expectNoBody(await del(owner, "K"), 204);
    expect((await listJson(owner)).data.map((d) => d.scope)).toEqual(["workflow"]);
    await expectNoBody(await del(owner, "K", `workflowId=${wf.toLowerCase()}`), 204);
    expect((await listJson(owner)).data).toEqual([]);
    expect(await counter(owner)).toBe(0);
  });

  it("rejects a malformed name or workflowId (400 VALIDATION_FAILED) and orgId (400 SECRET_SCOPE_UNSUPPORTED)", async () => {
    const owner = newOwner();
    let body = await problem(await del(owner, "1bad"), 400, "VALIDATION_FAILED");
    expect(body.errors).toEqual([{ path: "path.name", message: expect.any(String) }]);
    body = await problem(await del(owner, "OK", "workflowId=nope"), 400, "VALIDATION_FAILED");
    expect(body.errors).toEqual([{ path: "query.workflowId", message: "must be a ULID" }]);
    body = await problem(await del(owner, "1bad", "workflowId=nope"), 400, "VALIDATION_FAILED");
    expect(body.errors.map((e: Json) => e.path)).toEqual(["path.name", "query.workflowId"]);
    body = await problem(await del(owner, "OK", "orgId=acme"), 400, "SECRET_SCOPE_UNSUPPORTED");
    expect(body.errors).toEqual([{ path: "query.orgId", message: expect.any(String) }]);
  });
});

describe("owners are isolated", () => {
  it("one owner cannot see, replace or delete another's secrets", async () => {
    const alice = newOwner();
    const bob = newOwner();
    const wf = await insertWorkflow(alice);
    await put(alice, "SHARED_NAME", { value: "alice-user" });
    await put(alice, "SHARED_NAME", { value: "alice-wf", workflowId: wf });

    expect((await listJson(bob)).data).toEqual([]);
    await problem(await list(bob, `workflowId=${wf}`), 404, "WORKFLOW_NOT_FOUND");
    // Bob's put with the same name creates his own (201, not 204); with Alice's workflow it is 404.
    expect((await put(bob, "SHARED_NAME", { value: "bob" })).status).toBe(201);
    await problem(await put(bob, "SHARED_NAME", { value: "bob", workflowId: wf }), 404, "WORKFLOW_NOT_FOUND");
    // Bob's deletes answer 204 and delete nothing of Alice's.
    await expectNoBody(await del(bob, "SHARED_NAME", `workflowId=${wf}`), 204);
    await expectNoBody(await del(bob, "SHARED_NAME"), 204);

    expect(await Secret.resolveForExecution(alice, undefined, ["SHARED_NAME"])).toEqual({ SHARED_NAME: "alice-user" });
    expect(await Secret.resolveForExecution(alice, wf, ["SHARED_NAME"])).toEqual({ SHARED_NAME: "alice-wf" });
    expect(await Secret.resolveForExecution(bob, wf, ["SHARED_NAME"])).toEqual({});
    expect((await listJson(alice)).data).toHaveLength(2);
    expect(await counter(alice)).toBe(2);
    expect(await counter(bob)).toBe(0);
  });
});

describe("the cap (MAX_SECRETS_PER_OWNER=3)", () => {
  let capped: Runtime;
  beforeAll(() => {
    const config = buildConfig({
      ...stackEnv(),
      TABLE_NAME: runtime.config.tableName,
      LOG_LEVEL: "error",
      RATE_LIMIT_BURST: "1000000",
      RATE_LIMIT_RPS: "1000000",
      MAX_SECRETS_PER_OWNER: "3",
    });
    capped = createRuntime({ config, now: () => clock });
    setRuntime(capped);
  });
  afterAll(() => {
    setRuntime(runtime);
  });

  it("answers 429 SECRETS_LIMIT_REACHED with limit when creating past the cap; replacing at the cap is allowed", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    expect((await put(owner, "S1", { value: "v" })).status).toBe(201);
    expect((await put(owner, "S2", { value: "v" })).status).toBe(201);
    expect((await put(owner, "S1", { value: "v", workflowId: wf })).status).toBe(201); // workflow scope counts too
    const body = await problem(await put(owner, "S4", { value: "v" }), 429, "SECRETS_LIMIT_REACHED");
    expect(body.limit).toBe(3);
    const res = await put(owner, "S5", { value: "v" });
    expect(res.headers.get("retry-after")).toBeNull();
    await res.body?.cancel();
    expect((await put(owner, "S1", { value: "replaced" })).status).toBe(204);
    expect((await put(owner, "S1", { value: "replaced-wf", workflowId: wf })).status).toBe(204);
    expect(await storedSecretCount(owner)).toBe(3);
    expect(await rawItem(owner, "S4")).toBeUndefined();
    // Deleting one frees a slot.
    expect((await del(owner, "S2")).status).toBe(204);
    expect((await put(owner, "S4", { value: "v" })).status).toBe(201);
    expect(await counter(owner)).toBe(3);
  });

  it("checks fields and the workflow before the quota (400/404 before 429)", async () => {
    const owner = newOwner();
    for (const n of ["A", "B", "C"]) await put(owner, n, { value: "v" });
    await problem(await put(owner, "D", { value: "" }), 400, "VALIDATION_FAILED");
    await problem(await put(owner, "D", { value: "v", orgId: "x" }), 400, "SECRET_SCOPE_UNSUPPORTED");
    await problem(await put(owner, "D", { value: "v", workflowId: ulid() }), 404, "WORKFLOW_NOT_FOUND");
    await problem(await put(owner, "D", { value: "v" }), 429, "SECRETS_LIMIT_REACHED");
  });

  it("10 concurrent creates never exceed the cap", async () => {
    const owner = newOwner();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => put(owner, `C${i}`, { value: `v${i}` })));
    const statuses = results.map((r) => r.status).sort();
    await Promise.all(results.map((r) => r.body?.cancel()));
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
    expect(await storedSecretCount(owner)).toBe(3);
    expect(await counter(owner)).toBe(3);
  });

  it("concurrent creates, replaces and deletes of the same names keep the counter exact", async () => {
    const owner = newOwner();
    const ops = Array.from({ length: 30 }, (_, i) => (i % 3 === 2 ? del(owner, `R${i % 2}`) : put(owner, `R${i % 2}`, { value: `v${i}` })));
    const results = await Promise.all(ops);
    await Promise.all(results.map((r) => r.body?.cancel()));
    expect(results.every((r) => [201, 204].includes(r.status))).toBe(true);
    expect(await counter(owner)).toBe(await storedSecretCount(owner));
  });
});

describe("storage and use", () => {
  it("stores only ciphertext; decrypting it under another encryption context fails", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    const value = "plain-text-at-rest-check-0123456789";
    await put(owner, "AT_REST", { value });
    await put(owner, "AT_REST", { value, workflowId: wf });
    const item = (await rawItem(owner, "AT_REST"))!;
    const wfItem = (await rawItem(owner, "AT_REST", wf))!;
    for (const stored of [item, wfItem]) {
      const text = JSON.stringify(stored);
      expect(text).not.toContain(value);
      expect(text).not.toContain(Buffer.from(value).toString("base64"));
      expect(text).not.toContain(Buffer.from(value).toString("hex"));
      expect(stored).toMatchObject({ type: "secret", v: 1, name: "AT_REST" });
      expect(Object.keys(stored)).not.toContain("value");
    }
    // Two writes of the same value use different data keys and nonces.
    expect(wfItem.ciphertext).not.toBe(item.ciphertext);
    expect(wfItem.encryptedKey).not.toBe(item.encryptedKey);

    const sealed = { encryptedKey: item.encryptedKey, iv: item.iv, ciphertext: item.ciphertext, tag: item.tag, keyId: item.keyId };
    const context = Secret.encryptionContext(owner, "AT_REST");
    expect(context).toEqual({ owner: owner.toLowerCase(), name: "AT_REST", scope: "user", workflowId: "" });
    expect(await open(sealed, context)).toBe(value);
    for (const wrong of [
      { ...context, owner: newOwner().toLowerCase() },
      { ...context, name: "OTHER" },
      Secret.encryptionContext(owner, "AT_REST", wf),
    ]) {
      await expect(open(sealed, wrong)).rejects.toThrow(/cannot be opened/);
    }
    // The KMS-wrapped data key alone is bound to the context too.
    await expect(
      useKms(runtime).send(
        new DecryptCommand({
          CiphertextBlob: Buffer.from(item.encryptedKey, "base64"),
          EncryptionContext: { ...context, scope: "workflow" },
        }),
      ),
    ).rejects.toMatchObject({ name: "InvalidCiphertextException" });
    // Moving one secret's ciphertext onto another's item does not decrypt.
    await expect(open({ ...sealed, ciphertext: wfItem.ciphertext, iv: wfItem.iv, tag: wfItem.tag }, context)).rejects.toThrow();
  });

  it("resolveForExecution prefers the workflow-scoped value and decrypts only the names asked for", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    const otherWf = await insertWorkflow(owner);
    await put(owner, "KEY", { value: "user-key" });
    await put(owner, "KEY", { value: "wf-key", workflowId: wf });
    await put(owner, "ONLY_USER", { value: "only-user" });
    await put(owner, "ONLY_WF", { value: "only-wf", workflowId: wf });
    await put(owner, "UNUSED", { value: "unused" });

    expect(await Secret.resolveForExecution(owner, wf, ["KEY", "ONLY_USER", "ONLY_WF", "MISSING", "ap_x", "bad-name"])).toEqual({
      KEY: "wf-key",
      ONLY_USER: "only-user",
      ONLY_WF: "only-wf",
    });
    expect(await Secret.resolveForExecution(owner, otherWf.toLowerCase(), ["KEY", "ONLY_WF"])).toEqual({ KEY: "user-key" });
    expect(await Secret.resolveForExecution(owner, undefined, ["KEY"])).toEqual({ KEY: "user-key" });
    expect(await Secret.resolveForExecution(owner, wf, [])).toEqual({});

    const send = vi.spyOn(useKms(runtime), "send");
    try {
      await Secret.resolveForExecution(owner, wf, ["KEY", "KEY", "ONLY_USER"]);
      const decrypts = send.mock.calls.filter(([command]) => command instanceof DecryptCommand);
      expect(decrypts).toHaveLength(2);
    } finally {
      send.mockRestore();
    }
  });

  it("never writes the plaintext to stdout or stderr during a put/list/delete cycle, errors included", async () => {
    const owner = newOwner();
    const wf = await insertWorkflow(owner);
    const value = "log-canary-9f8e7d6c5b4a";
    const written: string[] = [];
    // Everything written is captured (and kept off the test output).
    const capture = (stream: NodeJS.WriteStream) =>
      vi.spyOn(stream, "write").mockImplementation(((chunk: unknown, ...rest: unknown[]) => {
        written.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"));
        const done = rest.find((r) => typeof r === "function") as (() => void) | undefined;
        if (done) process.nextTick(done);
        return true;
      }) as typeof stream.write);
    const out = capture(process.stdout);
    const err = capture(process.stderr);
    setLogLevel("debug");
    try {
      expect((await put(owner, "CANARY", { value })).status).toBe(201);
      expect((await put(owner, "CANARY", { value })).status).toBe(204);
      expect((await put(owner, "CANARY", { value, workflowId: wf })).status).toBe(201);
      expect((await put(owner, "CANARY", { value: 12345, extra: value })).status).toBe(400);
      expect((await put(owner, "ap_CANARY", { value })).status).toBe(400);
      expect((await put(owner, "CANARY", { value, orgId: value })).status).toBe(400);
      expect((await put(owner, "CANARY", { value, workflowId: ulid() })).status).toBe(404);
      expect((await list(owner)).status).toBe(200);
      expect((await list(owner, `workflowId=${wf}`)).status).toBe(200);
      expect(await Secret.resolveForExecution(owner, wf, ["CANARY"])).toEqual({ CANARY: value });

      // An unreachable key service: 503 UPSTREAM_UNAVAILABLE, and the logged warning holds no plaintext.
      const broken = createRuntime({
        config: buildConfig({
          ...stackEnv(),
          TABLE_NAME: runtime.config.tableName,
          KMS_ENDPOINT: "http://127.0.0.1:9",
          // The same bucket settings as the test's runtime: one bucket is shared by both configurations.
          RATE_LIMIT_BURST: "1000000",
          RATE_LIMIT_RPS: "1000000",
        }),
      });
      setRuntime(broken);
      try {
        const res = await put(owner, "CANARY2", { value });
        const body = await problem(res, 503, "UPSTREAM_UNAVAILABLE");
        expect(JSON.stringify(body)).not.toContain(value);
      } finally {
        setRuntime(runtime);
      }

      expect((await del(owner, "CANARY")).status).toBe(204);
      expect((await del(owner, "CANARY", `workflowId=${wf}`)).status).toBe(204);
    } finally {
      setLogLevel("error");
      out.mockRestore();
      err.mockRestore();
    }
    expect(written.some((line) => line.includes("key service call failed"))).toBe(true); // the capture works
    for (const line of written) expect(line).not.toContain(value);
  });
});
