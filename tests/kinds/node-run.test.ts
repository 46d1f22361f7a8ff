/**
 * `POST /nodes:run` (API.md §17.2) over a real HTTP server: one node, once, exactly as inside a workflow under
 * `:simulate`. The same SSRF guard (this file runs with private networks refused, as deployed), the same sandbox
 * limits and cut-off at `simulate_timeout_ms`, the same secret redaction with the caller's user-scoped secrets
 * (each compared with the step `:simulate` records for the same node), writes simulated and nothing sent, the
 * request's own validation paths, and the reference client's `client.nodes.run`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@avaprotocol/sdk-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { parseEther } from "viem";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { startUpstream, type Upstream } from "../support/upstream";
import { jsonClient, type Json, type Owner } from "../support/client";
import { devnet, setBalance } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";

const TIMEOUT_MS = 4_000;
let server: TestServer;
let target: Upstream;
let targetHits = 0;
const { call, ownerWithWallet } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({
    RATE_LIMIT_BURST: "100000",
    RATE_LIMIT_RPS: "10000",
    SIMULATE_TIMEOUT_MS: String(TIMEOUT_MS),
    ALLOW_PRIVATE_NETWORK: "false",
  });
  server = await startTestServer(createServiceApp());
  target = await startUpstream((_req, res) => {
    targetHits++;
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end("{}");
  });
});

afterAll(async () => {
  await server?.close();
  await target?.close();
});

const manual = { id: "t", name: "start", type: "manual", config: {} };

/** The node's step as `:simulate` records it for the same node and variables (the trigger step dropped). */
async function simulatedStep(who: Owner, node: Json, inputVariables: Json = {}): Promise<Json> {
  const res = await call(who, "POST", "/workflows:simulate", { trigger: manual, nodes: [node], inputVariables });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.steps[1];
}

/** The fields /nodes:run shares with a step. */
const stepFields = (step: Json) => {
  const { success, error, errorCode, output, log, inputs } = step;
  return JSON.parse(JSON.stringify({ success, error, errorCode, output, log, inputs }));
};

describe("POST /nodes:run", () => {
  it("runs one node with inputVariables as variable roots and answers its step's fields", async () => {
    const alice = await ownerWithWallet("101");
    const node = {
      id: "c",
      name: "compute",
      type: "customCode",
      config: {
        source: "console.log('sum', prices.data.a + prices.data.b); return { sum: prices.data.a + prices.data.b, chain: settings.chainId }",
      },
    };
    const before = Date.now();
    const res = await call(alice, "POST", "/nodes:run", { node, inputVariables: { prices: { data: { a: 2, b: 40 } } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      success: true,
      output: { data: { sum: 42, chain: devnet().chainId } },
      log: expect.stringContaining("sum 42"),
      inputs: [],
      startAt: expect.any(Number),
      endAt: expect.any(Number),
      executionContext: { is_simulated: false, provider: "sandbox", chain_id: null },
    });
    expect(res.body.startAt).toBeGreaterThanOrEqual(before - 1000);
    expect(res.body.endAt).toBeGreaterThanOrEqual(res.body.startAt);

    const templated = await call(alice, "POST", "/nodes:run", {
      node: { id: "c", name: "compute", type: "customCode", config: { source: "return {{prices.data.a}} * 2" } },
      inputVariables: { prices: { data: { a: 21 } } },
    });
    expect(templated.body).toMatchObject({ success: true, output: { data: 42 }, inputs: ["prices.data.a"] });

    const unresolved = await call(alice, "POST", "/nodes:run", {
      node: { id: "c", name: "compute", type: "customCode", config: { source: "return {{nothing.here}}" } },
    });
    expect(unresolved.status).toBe(200);
    expect(unresolved.body).toMatchObject({ success: false, errorCode: "TEMPLATE_UNRESOLVED", output: { data: null } });
  });

  it("applies the SSRF guard of a run: loopback and metadata addresses refused, nothing sent", async () => {
    const alice = await ownerWithWallet("102");
    for (const url of [`${target.url}/private`, "http://169.254.169.254/latest/meta-data/"]) {
      const node = { id: "h", name: "fetch", type: "restApi", config: { url, method: "GET" } };
      const res = await call(alice, "POST", "/nodes:run", { node });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ success: false, errorCode: "DESTINATION_NOT_ALLOWED", output: { data: null } });
      expect(stepFields(res.body)).toEqual(stepFields(await simulatedStep(alice, node)));
    }
    expect(targetHits).toBe(0);
  });

  it("applies the sandbox of a run and is cut off at simulate_timeout_ms like :simulate", async () => {
    const alice = await ownerWithWallet("103");
    const thrown = { id: "c", name: "c", type: "customCode", config: { source: "throw new Error('nope')" } };
    const failed = await call(alice, "POST", "/nodes:run", { node: thrown });
    expect(failed.body).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR" });
    expect(stepFields(failed.body)).toEqual(stepFields(await simulatedStep(alice, thrown)));

    const spin = { id: "c", name: "c", type: "customCode", config: { source: "for (;;) {}" } };
    const started = Date.now();
    const res = await call(alice, "POST", "/nodes:run", { node: spin });
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      success: false,
      errorCode: "SANDBOX_TIMEOUT",
      error: `simulation time limit of ${TIMEOUT_MS} ms reached`,
      output: { data: null },
    });
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 200);
    expect(took).toBeLessThan(TIMEOUT_MS + 2_000);
  });

  it("resolves the caller's user-scoped secrets and redacts them everywhere, as a run does", async () => {
    const alice = await ownerWithWallet("104");
    const SECRET = "s3cr3t-value-for-node-run";
    expect((await call(alice, "PUT", "/secrets/TOKEN", { value: SECRET })).status).toBe(201);
    const node = {
      id: "c",
      name: "c",
      type: "customCode",
      config: {
        source:
          "console.log('token', secrets.TOKEN, encodeURIComponent(secrets.TOKEN)); return { s: secrets.TOKEN, t: '{{secrets.TOKEN}}', len: secrets.TOKEN.length }",
      },
    };
    const res = await call(alice, "POST", "/nodes:run", { node });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(SECRET);
    expect(res.body.output).toEqual({ data: { s: "***", t: "***", len: SECRET.length } });
    expect(res.body.log).toContain("token *** ***");
    expect(stepFields(res.body)).toEqual(stepFields(await simulatedStep(alice, node)));

    // Another owner's secret of the same name is not the caller's.
    const bob = await ownerWithWallet("105");
    const other = await call(bob, "POST", "/nodes:run", { node });
    expect(other.body.success).toBe(false);
    expect(JSON.stringify(other.body)).not.toContain(SECRET);
  });

  it("simulates writes from the caller's runner and sends nothing", async () => {
    const alice = await ownerWithWallet("106");
    await setBalance(alice.wallet, parseEther("1"));
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const node = { id: "pay", name: "pay", type: "ethTransfer", config: { destination: recipient, amount: "1000" } };
    const res = await call(alice, "POST", "/nodes:run", { node, inputVariables: { settings: { runner: alice.wallet } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.success).toBe(true);
    const balance = await devnet().client.getBalance({ address: recipient });
    expect(balance).toBe(0n);
  });

  it("validates the request at its own paths: 400 VALIDATION_FAILED, UNSUPPORTED_CHAIN, WALLET_NOT_OWNED", async () => {
    const alice = await ownerWithWallet("107");
    const bob = await ownerWithWallet("108");
    const expect400 = async (body: unknown, code: string, path: string) => {
      const res = await call(alice, "POST", "/nodes:run", body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.code).toBe(code);
      expect(res.body.errors.map((e: Json) => e.path)).toContain(path);
    };
    await expect400({}, "VALIDATION_FAILED", "body.node");
    await expect400(
      { node: { id: "c", name: "c", type: "customCode", config: { source: "return 1" } }, extra: 1 },
      "VALIDATION_FAILED",
      "body.extra",
    );
    await expect400({ node: { id: "c", name: "c", type: "customCode", config: {} } }, "VALIDATION_FAILED", "body.node.config.source");
    await expect400({ node: { id: "c", name: "c", type: "nope", config: {} } }, "VALIDATION_FAILED", "body.node.type");
    await expect400({ node: { id: "w", name: "w", type: "await", config: { channel: "api" } } }, "VALIDATION_FAILED", "body.node.type");
    await expect400(
      { node: { id: "c", name: "c", type: "customCode", config: { source: "return {{c.data}}" } } },
      "VALIDATION_FAILED",
      "body.node.config.source",
    );
    await expect400(
      { node: { id: "c", name: "c", type: "customCode", config: { source: "return 1" } }, inputVariables: { c: 1 } },
      "VALIDATION_FAILED",
      "body.inputVariables.c",
    );
    const pay = { id: "pay", name: "pay", type: "ethTransfer", config: { destination: bob.wallet, amount: "1" } };
    await expect400({ node: pay }, "VALIDATION_FAILED", "body.inputVariables.settings.runner");
    await expect400(
      { node: pay, inputVariables: { settings: { runner: bob.wallet } } },
      "WALLET_NOT_OWNED",
      "body.inputVariables.settings.runner",
    );
    await expect400(
      { node: { id: "c", name: "c", type: "customCode", config: { source: "return 1" } }, chainId: 999_999 },
      "UNSUPPORTED_CHAIN",
      "body.chainId",
    );
    await expect400(
      { node: { id: "b", name: "b", type: "balance", config: { address: bob.wallet, chainId: 999_999 } } },
      "UNSUPPORTED_CHAIN",
      "body.node.config.chainId",
    );
  });

  it("answers the reference client's client.nodes.run (API.md wins where the client's types differ)", async () => {
    const client = new Client({ baseUrl: server.url });
    await client.auth.exchangeWithKey(generatePrivateKey(), {
      uri: "https://app.example.com",
      chainId: devnet().chainId,
      version: "0.1.0",
    });
    const res = await client.nodes.run({
      node: { id: "c", name: "c", type: "customCode", config: { lang: "javascript", source: "return { doubled: input.n * 2 }" } },
      inputVariables: { input: { n: 21 } },
    } as never);
    expect(res).toMatchObject({ success: true, output: { data: { doubled: 42 } } });
  });
});
