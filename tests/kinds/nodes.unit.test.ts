/**
 * Each node kind's output shape and failure codes (API.md §8.4, §10.2) through the engine: restApi and
 * graphqlQuery against a loopback server, customCode, branch, filter, loop (modes, limit, iteration
 * failures, gas summed), and ethTransfer/contractWrite sending through a recording fake of the SendCalls
 * port (the real sender has its own tests): requests, batching, outcomes mapped to step codes, gas and cogs.
 * Reads and simulated writes against the devnet are in chain-nodes.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeFunctionData, parseAbi, parseAbiItem } from "viem";
import { useConfigRuntime } from "../support/runtime";
import { transferFunction } from "../support/abis";
import { barrier, code, fakeSender, json, run, startServer, stepOf, WALLET } from "../engine/engine-support";

let server: Awaited<ReturnType<typeof startServer>>;

beforeAll(async () => {
  useConfigRuntime({ LOOP_MAX_ITERATIONS: "5", LOOP_MAX_PARALLEL: "3" });
  server = await startServer({
    "/ok": (req, res, body) =>
      res.writeHead(200, "Fine", { "content-type": "application/json", "x-Thing": "1" }).end(JSON.stringify({ method: req.method, body })),
    "/text": (_req, res) => res.writeHead(200, { "content-type": "text/plain" }).end("plain words"),
    "/missing": (_req, res) => json(res, 404, { reason: "nothing here" }),
    "/graphql": (_req, res, body) => {
      const { query, variables } = JSON.parse(body) as { query: string; variables: Record<string, string> };
      if (query.includes("broken")) return json(res, 200, { data: null, errors: [{ message: "Cannot query field broken" }] });
      if (query.includes("html")) return res.writeHead(200, { "content-type": "text/html" }).end("<html>no</html>");
      return json(res, 200, { data: { echo: variables.name, query } });
    },
    "/meet3": barrier(3),
    "/item": (req, res) => {
      const n = Number(new URL(req.url!, "http://x").searchParams.get("n"));
      if (n === 2) return json(res, 500, { n });
      return json(res, 200, { n });
    },
  });
});
afterAll(() => server.close());

const one = async (node: Record<string, unknown>, overrides = {}) => {
  const result = await run({ nodes: [node] }, overrides);
  return { result, step: stepOf(result.steps, node.id as string)! };
};

describe("restApi", () => {
  it("outputs {status, statusText, url, headers, data} with the parsed JSON body", async () => {
    const { step, result } = await one({
      id: "r",
      name: "r",
      type: "restApi",
      config: { url: `${server.origin}/ok`, method: "post", body: '{"a":1}' },
    });
    expect(result.status).toBe("success");
    expect(step.output.data).toMatchObject({
      status: 200,
      statusText: "Fine",
      url: `${server.origin}/ok`,
      data: { method: "POST", body: '{"a":1}' },
    });
    expect((step.output.data as { headers: Record<string, string> }).headers["x-thing"]).toBe("1");
  });

  it("gives a non-JSON body as text", async () => {
    const { step } = await one({ id: "r", name: "r", type: "restApi", config: { url: `${server.origin}/text`, method: "GET" } });
    expect((step.output.data as { data: unknown }).data).toBe("plain words");
  });

  it('fails HTTP_ERROR "HTTP <status> <statusText>" on 400 or above, the output recorded', async () => {
    const { step } = await one({ id: "r", name: "r", type: "restApi", config: { url: `${server.origin}/missing`, method: "GET" } });
    expect(step).toMatchObject({ success: false, errorCode: "HTTP_ERROR", error: "HTTP 404 Not Found" });
    expect(step.output.data).toMatchObject({ status: 404, data: { reason: "nothing here" } });
  });

  it("fails INVALID_INPUT when the expanded URL is not http(s), and NETWORK_ERROR when nothing listens", async () => {
    const bad = await one({ id: "r", name: "r", type: "restApi", config: { url: "{{trigger1.data.greeting}}", method: "GET" } });
    expect(bad.step).toMatchObject({ errorCode: "INVALID_INPUT", error: "url is not an http or https URL" });
    const closed = await one({ id: "r", name: "r", type: "restApi", config: { url: "http://127.0.0.1:9/x", method: "GET" } });
    expect(closed.step.errorCode).toMatch(/NETWORK_ERROR|DESTINATION_NOT_ALLOWED/);
  });
});

describe("graphqlQuery", () => {
  const gql = (query: string) => ({
    id: "g",
    name: "g",
    type: "graphqlQuery",
    config: { url: `${server.origin}/graphql`, query, variables: { name: "{{trigger1.data.greeting}}" } },
  });

  it("POSTs {query, variables} and outputs the parsed body", async () => {
    const { step } = await one(gql("query { echo }"));
    expect(step.success).toBe(true);
    expect(step.output).toEqual({ data: { data: { echo: "hi", query: "query { echo }" } } });
    expect(step.inputs).toEqual(["trigger1.data.greeting"]);
  });

  it("fails HTTP_ERROR on a non-empty errors array, the body recorded", async () => {
    const { step } = await one(gql("query { broken }"));
    expect(step).toMatchObject({ success: false, errorCode: "HTTP_ERROR", error: "GraphQL error: Cannot query field broken" });
    expect(step.output).toEqual({ data: { data: null, errors: [{ message: "Cannot query field broken" }] } });
  });

  it("fails HTTP_ERROR on a body that is not JSON", async () => {
    const { step } = await one(gql("query { html }"));
    expect(step).toMatchObject({ success: false, errorCode: "HTTP_ERROR", output: { data: "<html>no</html>" } });
  });
});

describe("customCode", () => {
  it("returns the JSON-safe value and the console log", async () => {
    const { step } = await one(
      code("c", "console.info('n', 1); return { u: undefined, n: NaN, big: 10n ** 20n, list: trigger1.data.items }"),
    );
    expect(step.output).toEqual({ data: { n: null, big: "100000000000000000000", list: [1, 2, 3] } });
    expect(step.log).toBe("n 1");
  });

  it("fails SANDBOX_ERROR with the message, keeping the log, and SANDBOX_TIMEOUT on an endless loop", async () => {
    const thrown = await one(code("c", "console.log('before'); throw new TypeError('nope')"));
    expect(thrown.step).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR", error: "nope", log: "before" });
    const syntax = await one(code("c", "return ("));
    expect(syntax.step.errorCode).toBe("SANDBOX_ERROR");
  });
});

describe("filter", () => {
  const filterNode = (inputVariable: string, expression: string) => ({
    id: "f",
    name: "f",
    type: "filter",
    config: { inputVariable, expression },
  });

  it("keeps the elements for which the expression is true, with value and index", async () => {
    const { step } = await one(filterNode("{{trigger1.data.items}}", "value > 1 && index < 2"));
    expect(step.output).toEqual({ data: [2] });
    expect(step.inputs).toEqual(["trigger1.data.items"]);
  });

  it("accepts a bare path and a function body", async () => {
    const { step } = await one(filterNode("trigger1.data.items", "if (value === 1) return false; return true"));
    expect(step.output).toEqual({ data: [2, 3] });
  });

  it("fails INVALID_INPUT on a non-array input and SANDBOX_ERROR on a throw", async () => {
    expect((await one(filterNode("trigger1.data.greeting", "true"))).step).toMatchObject({ errorCode: "INVALID_INPUT" });
    expect((await one(filterNode("trigger1.data.items", "value.x.y"))).step).toMatchObject({ errorCode: "SANDBOX_ERROR" });
  });
});

describe("loop", () => {
  const loopNode = (config: Record<string, unknown>) => ({
    id: "l",
    name: "l",
    type: "loop",
    config: { inputVariable: "{{trigger1.data.items}}", ...config },
  });

  it("runs the runner per element with iterVar and index, in input order", async () => {
    const { step } = await one(
      loopNode({ iterVar: "item", runner: { type: "customCode", config: { source: "return item * 10 + index + {{ item }}" } } }),
    );
    expect(step.output).toEqual({ data: [11, 23, 35] });
  });

  it("parallel mode runs iterations at the same time (three requests meet), at most loop_max_parallel", async () => {
    const { step } = await one(
      loopNode({
        executionMode: "parallel",
        runner: { type: "restApi", config: { url: `${server.origin}/meet3?i={{index}}`, method: "GET" } },
      }),
    );
    expect(step.success).toBe(true);
    expect((step.output.data as { status: number }[]).map((o) => o.status)).toEqual([200, 200, 200]);
  });

  it("sequential: a failed iteration fails ITERATION_FAILED and the rest do not run", async () => {
    const { step } = await one(
      loopNode({ runner: { type: "restApi", config: { url: `${server.origin}/item?n={{value}}`, method: "GET" } } }),
    );
    expect(step).toMatchObject({ success: false, errorCode: "ITERATION_FAILED", error: "iteration 1: HTTP 500 Internal Server Error" });
    expect((step.output.data as unknown[]).map((o) => (o === null ? null : (o as { data: { n: number } }).data.n))).toEqual([
      1,
      null,
      null,
    ]);
  });

  it("parallel: every started iteration completes and failed ones are null", async () => {
    const { step } = await one(
      loopNode({
        executionMode: "parallel",
        runner: { type: "customCode", config: { source: "if (index === 0) throw new Error('first'); return index" } },
      }),
    );
    expect(step).toMatchObject({ errorCode: "ITERATION_FAILED", error: "iteration 0: first", output: { data: [null, 1, 2] } });
  });

  it("fails LOOP_LIMIT_EXCEEDED above loop_max_iterations and INVALID_INPUT on a non-array", async () => {
    const big = await run(
      { nodes: [loopNode({ runner: { type: "customCode", config: { source: "return 1" } } })] },
      { triggerOutput: { data: { items: [1, 2, 3, 4, 5, 6] }, headers: {}, pathParams: {} } },
    );
    expect(stepOf(big.steps, "l")).toMatchObject({ errorCode: "LOOP_LIMIT_EXCEEDED", error: "loop input has 6 items; the limit is 5" });
    const notArray = await one(
      loopNode({ inputVariable: "trigger1.data.greeting", runner: { type: "customCode", config: { source: "return 1" } } }),
    );
    expect(notArray.step.errorCode).toBe("INVALID_INPUT");
  });

  it("ethTransfer runners run one at a time even in parallel mode, and their gas is summed into one cost", async () => {
    const sender = fakeSender();
    let inFlight = 0;
    let most = 0;
    const send: typeof sender.send = async (request) => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
      return sender.send(request);
    };
    const result = await run(
      {
        nodes: [
          loopNode({
            executionMode: "parallel",
            runner: { type: "ethTransfer", config: { destination: "0x3333333333333333333333333333333333333333", amount: "{{value}}" } },
          }),
        ],
      },
      { sendCalls: send },
    );
    const step = stepOf(result.steps, "l")!;
    expect(most).toBe(1);
    expect(sender.requests.map((r) => r.calls[0]!.value)).toEqual([1n, 2n, 3n]);
    expect(step).toMatchObject({ success: true, gasUsed: "300000", totalGasCost: "900000", gasPrice: "3" });
    expect(result.cogs).toEqual([
      { nodeId: "l", costType: "gas", fee: { amount: "900000", unit: "WEI" }, gasUnits: "300000", chainId: 31337 },
    ]);
  });
});

describe("ethTransfer and contractWrite through SendCalls", () => {
  const DEST = "0x1111111111111111111111111111111111111111";
  const TOKEN = "0x2222222222222222222222222222222222222222";
  const abi = [transferFunction, parseAbiItem("function setFlags(bool[] flags, string note)")];
  /** A contractWrite node `w` on TOKEN with `abi` (and `extra` settings) making `methodCalls`. */
  const write = (methodCalls: unknown[], extra: Record<string, unknown> = {}) => ({
    id: "w",
    name: "w",
    type: "contractWrite",
    config: { contractAddress: TOKEN, contractAbi: abi, ...extra, methodCalls },
  });
  /** Nodes `a` and `b`, both right after the trigger. */
  const sideBySide = (a: Record<string, unknown>, b: Record<string, unknown>) => ({
    nodes: [a, b],
    edges: [
      { id: "e1", source: "trig", target: "a" },
      { id: "e2", source: "trig", target: "b" },
    ],
  });
  /** What each element of a sent write reports (fakeSender's first answer). */
  const sent = {
    success: true,
    value: null,
    isSimulated: false,
    userOpHash: `0x${"1".padStart(64, "a")}`,
    transactionHash: `0x${"1".padStart(64, "b")}`,
    blockNumber: 101,
  };

  it("ethTransfer sends one call and outputs {from, to, value, chainId, isSimulated, userOpHash, transactionHash} with gas and cogs", async () => {
    const sender = fakeSender();
    const result = await run(
      {
        nodes: [{ id: "pay", name: "pay", type: "ethTransfer", config: { destination: "{{dest}}", amount: "1000" } }],
        inputVariables: { dest: DEST },
      },
      { sendCalls: sender.send },
    );
    // Each request names its node: the operation's identity, and so its nonce key (API.md §19).
    expect(sender.requests).toEqual([{ chainId: 31337, calls: [{ to: DEST, value: 1000n }], nodeId: "pay" }]);
    const step = stepOf(result.steps, "pay")!;
    expect(step.output.data).toEqual({
      from: WALLET,
      to: DEST,
      value: "1000",
      chainId: 31337,
      isSimulated: false,
      userOpHash: `0x${"1".padStart(64, "a")}`,
      transactionHash: `0x${"1".padStart(64, "b")}`,
    });
    expect(step).toMatchObject({ gasUsed: "100000", gasPrice: "3", totalGasCost: "300000" });
    expect(result.cogs).toEqual([
      { nodeId: "pay", costType: "gas", fee: { amount: "300000", unit: "WEI" }, gasUnits: "100000", chainId: 31337 },
    ]);
  });

  it("ethTransfer `max` asks the sender for the whole balance", async () => {
    const sender = fakeSender();
    await run(
      { nodes: [{ id: "pay", name: "pay", type: "ethTransfer", config: { destination: DEST, amount: "max" } }] },
      { sendCalls: sender.send },
    );
    expect(sender.requests[0]).toMatchObject({ sendMax: true, calls: [{ to: DEST }] });
  });

  it("ethTransfer fails INVALID_INPUT when the destination expands to a non-address or the amount to a non-integer; nothing is sent", async () => {
    const sender = fakeSender();
    const result = await run(
      sideBySide(
        { id: "a", name: "a", type: "ethTransfer", config: { destination: "{{trigger1.data.greeting}}", amount: "1" } },
        { id: "b", name: "b", type: "ethTransfer", config: { destination: DEST, amount: "{{trigger1.data.greeting}}" } },
      ),
      { sendCalls: sender.send },
    );
    expect(stepOf(result.steps, "a")).toMatchObject({ errorCode: "INVALID_INPUT", error: "destination is not an address" });
    expect(stepOf(result.steps, "b")).toMatchObject({ errorCode: "INVALID_INPUT" });
    expect(sender.requests).toEqual([]);
  });

  it("contractWrite batches several method calls into ONE request with ABI-encoded typed params", async () => {
    const sender = fakeSender();
    const result = await run(
      {
        nodes: [
          write(
            [
              { methodName: "transfer", methodParams: ["{{dest}}", "0x10"] },
              {
                methodName: "setFlags(bool[],string)",
                methodParams: ["[true,false]", "note {{trigger1.data.greeting}}"],
                contractAddress: DEST,
              },
            ],
            { gasLimit: "500000" },
          ),
        ],
        inputVariables: { dest: DEST },
      },
      { sendCalls: sender.send },
    );
    const typed = parseAbi(["function transfer(address to, uint256 amount)", "function setFlags(bool[] flags, string note)"]);
    expect(sender.requests).toEqual([
      {
        chainId: 31337,
        nodeId: expect.any(String),
        gasLimit: 500000n,
        calls: [
          { to: TOKEN, data: encodeFunctionData({ abi: typed, functionName: "transfer", args: [DEST, 16n] }) },
          { to: DEST, data: encodeFunctionData({ abi: typed, functionName: "setFlags", args: [[true, false], "note hi"] }) },
        ],
      },
    ]);
    const step = stepOf(result.steps, "w")!;
    expect(step.success).toBe(true);
    expect(step.output.data).toEqual([
      { methodName: "transfer", contractAddress: TOKEN, ...sent },
      { methodName: "setFlags(bool[],string)", contractAddress: DEST, ...sent },
    ]);
    expect(result.cogs).toHaveLength(1);
  });

  it("contractWrite with raw callData and value sends that call", async () => {
    const sender = fakeSender();
    await run(
      { nodes: [{ id: "w", name: "w", type: "contractWrite", config: { contractAddress: TOKEN, callData: "0xdeadbeef", value: "7" } }] },
      { sendCalls: sender.send },
    );
    expect(sender.requests).toEqual([
      { chainId: 31337, calls: [{ to: TOKEN, data: "0xdeadbeef", value: 7n }], nodeId: expect.any(String) },
    ]);
  });

  it("maps a reverted operation to USEROP_REVERTED, every element success false, gas and cogs still recorded", async () => {
    const sender = fakeSender([
      {
        ok: false,
        errorCode: "USEROP_REVERTED",
        error: "user operation reverted: nope",
        userOpHash: `0x${"c".repeat(64)}`,
        transactionHash: `0x${"d".repeat(64)}`,
        blockNumber: 5n,
        gasUsed: 50_000n,
        gasPrice: 2n,
        totalGasCost: 100_000n,
      },
    ]);
    const result = await run(
      {
        nodes: [
          write([
            { methodName: "transfer", methodParams: [DEST, "1"] },
            { methodName: "transfer", methodParams: [DEST, "2"] },
          ]),
        ],
      },
      { sendCalls: sender.send },
    );
    const step = stepOf(result.steps, "w")!;
    expect(step).toMatchObject({
      success: false,
      errorCode: "USEROP_REVERTED",
      error: "user operation reverted: nope",
      gasUsed: "50000",
      totalGasCost: "100000",
      gasPrice: "2",
    });
    expect((step.output.data as { success: boolean; error: string }[]).map((e) => [e.success, e.error])).toEqual([
      [false, "user operation reverted: nope"],
      [false, "user operation reverted: nope"],
    ]);
    expect(result.cogs).toEqual([
      { nodeId: "w", costType: "gas", fee: { amount: "100000", unit: "WEI" }, gasUnits: "50000", chainId: 31337 },
    ]);
    expect(result.error).toBe("1 of 1 steps failed: w");
  });

  it("maps a rejected operation and an insufficient balance to their codes, without gas", async () => {
    const sender = fakeSender([
      { ok: false, errorCode: "USEROP_REJECTED", error: "AA21 didn't pay prefund" },
      { ok: false, errorCode: "INSUFFICIENT_BALANCE", error: "The wallet holds 0 wei" },
    ]);
    const result = await run(
      sideBySide(
        { id: "a", name: "a", type: "ethTransfer", config: { destination: DEST, amount: "5" } },
        { id: "b", name: "b", type: "ethTransfer", config: { destination: DEST, amount: "5" } },
      ),
      { sendCalls: sender.send },
    );
    const codes = result.steps
      .slice(1)
      .map((s) => s.errorCode)
      .sort();
    expect(codes).toEqual(["INSUFFICIENT_BALANCE", "USEROP_REJECTED"]);
    expect(result.steps.slice(1).every((s) => s.gasUsed === undefined)).toBe(true);
    expect(result.cogs).toEqual([]);
  });

  it("a method param that does not parse by its ABI type fails INVALID_INPUT naming it", async () => {
    const sender = fakeSender();
    const result = await run(
      {
        nodes: [write([{ methodName: "transfer", methodParams: [DEST, "{{trigger1.data.greeting}}"] }])],
      },
      { sendCalls: sender.send },
    );
    expect(stepOf(result.steps, "w")).toMatchObject({
      errorCode: "INVALID_INPUT",
      error: "methodCalls[0].methodParams[1] must be an integer (decimal or 0x hex) for uint256",
    });
    expect(sender.requests).toEqual([]);
  });
});
