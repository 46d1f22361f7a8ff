/**
 * Issue 9's benchmarks, part of `npm run bench` (called from bench/run.ts once the local stack, the runtime and
 * the HTTP server are up), each against a baseline measured in the same run, round by round in turn with it
 * (this 2-core machine is shared and its load drifts: interleaving lets the drift hit both sides alike):
 *
 *   engine, 10 off-chain nodes   runWorkflow (mode run, no sends, no recording)  vs  the same node kinds called
 *                                directly as plain functions in topological order (goal: ≥ 0.5× the throughput)
 *   blocking trigger → terminal  POST /workflows/{id}:trigger {isBlocking: true} on a one-node workflow  vs
 *                                (a) runWorkflow of the same definition alone, (b) the claim + runWorkflow + finish
 *   SSE status write → frame     an open GET /executions/{id}:stream until the terminal frame, after finish()  vs
 *                                that write plus one direct GetItem observing it; notified and polling alone
 *
 *   BENCH_WORKFLOW_ROUNDS (default min(100, BENCH_ROUNDS)), BENCH_STREAM_ROUNDS (default min(40, that)).
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { UpdateCommand } from "@aws-sdk/lib-dynamodb";
import type { Address } from "viem";
import { ulid } from "ulid";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { signInWithAccount } from "../local/client";
import { Keys } from "../shared/store/item-keys";
import { validateDefinition } from "../shared/workflow/definition";
import { compileGraph } from "../shared/workflow/graph";
import { runWorkflow } from "../shared/engine/run";
import { SandboxSession } from "../shared/sandbox/session";
import type { RunInput } from "../shared/engine/types";
import { executionFee, valueFeeFor } from "../shared/engine/fee-rules";
import { renderConfig, renderString, resolvePath, wholeTemplatePath, TemplateUnresolvedError } from "../shared/templates";
import { runVariables, stepVariables } from "../shared/engine/variables";
import { isSuspend, type NodeEnv, type NodeResult } from "../shared/kinds/kind";
import { kinds } from "../shared/kinds/kinds";
import { interleaved, timed, type Stat } from "./stats";
import { setRuntime, type Runtime } from "../shared/current-runtime";
import { DEFAULT_LIMITS } from "../shared/kinds/support/schema-kit";
import { type WorkflowRecord } from "../shared/workflow/record";
import { claim } from "../shared/workflow/claim";
import { getForRun } from "../shared/workflow/stored";
import { readSummary } from "../shared/execution/execution-read";
import * as ExecutionWrite from "../shared/execution/execution-write";

/** What bench/run.ts lends: its server, runtime and table. */
export interface BenchContext {
  base: string;
  runtime: Runtime;
  report: (name: string, stat: Stat, baselineName: string, baseline: Stat) => void;
  rows: string[][];
}

const ENGINE_GOAL = 0.5;

export async function benchWorkflows(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_WORKFLOW_ROUNDS ?? Math.min(100, Number(process.env.BENCH_ROUNDS ?? 100)));
  const streamRounds = Number(process.env.BENCH_STREAM_ROUNDS ?? Math.min(40, rounds));
  const target = await startTarget();
  const began = performance.now();
  try {
    await benchEngine(ctx, rounds, target.origin);
    const who = await newOwner(ctx.base, "9");
    const workflowId = await createOneNodeWorkflow(ctx.base, who);
    await benchBlockingTrigger(ctx, rounds, who, workflowId);
    await benchStream(ctx, streamRounds, who, workflowId);
    await benchNodeRun(ctx, rounds, who);
    console.log(`workflow benches: ${((performance.now() - began) / 1000).toFixed(1)} s (rounds ${rounds}, stream rounds ${streamRounds})`);
  } finally {
    setRuntime(ctx.runtime);
    target.server.closeAllConnections();
    target.server.close();
  }
}

/** Adds `text` to the last row reported. */
export const note = (ctx: BenchContext, text: string) => ctx.rows[ctx.rows.length - 1]!.push(text);

// ---------------------------------------------------------------------------------------------------------
// 1. Engine throughput: 10 off-chain nodes

/**
 * trigger → quotes (restApi) → doubled (customCode) → high, low (filters, concurrent) → summary (customCode)
 * → decide (branch) → report (restApi POST), audit (restApi, concurrent) → confirmed (customCode) → done.
 * Every node runs (the branch's other condition leads nowhere), the HTTP target answers fixed JSON: each run
 * does the same work and ends with the same `done` output, which both sides check.
 */
function tenNodeBody(origin: string) {
  const code = (id: string, source: string) => ({ id, name: id, type: "customCode", config: { source } });
  const rest = (id: string, config: Record<string, unknown>) => ({ id, name: id, type: "restApi", config });
  const edge = (source: string, target: string) => ({ id: `${source}-${target}`.replace(/\./g, "_"), source, target });
  const edges = [
    edge("t", "quotes"),
    edge("quotes", "doubled"),
    edge("doubled", "high"),
    edge("doubled", "low"),
    edge("high", "summary"),
    edge("low", "summary"),
    edge("summary", "decide"),
    edge("decide.many", "report"),
    edge("decide.many", "audit"),
    edge("report", "confirmed"),
    edge("audit", "confirmed"),
    edge("confirmed", "done"),
  ];
  return {
    trigger: { id: "t", name: "start", type: "manual", config: { data: { minimum: 20 } } },
    nodes: [
      rest("quotes", { url: `${origin}/quotes`, method: "GET" }),
      code("doubled", "return quotes.data.data.prices.map((p) => p * 2)"),
      {
        id: "high",
        name: "high",
        type: "filter",
        config: { inputVariable: "{{doubled.data}}", expression: "value > {{start.data.minimum}}" },
      },
      {
        id: "low",
        name: "low",
        type: "filter",
        config: { inputVariable: "{{doubled.data}}", expression: "value <= {{start.data.minimum}}" },
      },
      code(
        "summary",
        "const all = high.data.concat(low.data); return { high: high.data.length, low: low.data.length, total: all.reduce((a, b) => a + b, 0) }",
      ),
      {
        id: "decide",
        name: "decide",
        type: "branch",
        config: {
          conditions: [
            { id: "many", expression: "summary.data.total > 100 && summary.data.high > 0" },
            { id: "few", expression: "" },
          ],
        },
      },
      rest("report", {
        url: `${origin}/report`,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"high": {{summary.data.high}}, "total": {{summary.data.total}}}',
      }),
      rest("audit", { url: `${origin}/audit?total={{summary.data.total}}`, method: "GET" }),
      code("confirmed", "return report.data.status === 200 && report.data.data.accepted === true"),
      code("done", "return { confirmed: confirmed.data, audited: audit.data.data.ok, total: summary.data.total }"),
    ],
    edges,
    inputVariables: { settings: { runner: privateKeyToAccount(generatePrivateKey()).address } },
  };
}

const EXPECTED_DONE = JSON.stringify({ confirmed: true, audited: true, total: 222 });

/** The restApi target: fixed answers on loopback (the local runtime allows private destinations). */
async function startTarget() {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      const body =
        path === "/quotes"
          ? { prices: [3, 8, 12, 5, 21, 9, 14, 2, 30, 7] }
          : path === "/report"
            ? { accepted: true }
            : path === "/audit"
              ? { ok: true }
              : undefined;
      res.writeHead(body ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(body ?? { error: "no route" }));
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function prepare(body: unknown, runtime: Runtime) {
  const { config } = runtime;
  return validateDefinition(body, {
    mode: "simulate",
    now: Date.now(),
    limits: { ...DEFAULT_LIMITS, ...config.limits },
    chains: config.chains,
    defaultChainId: config.defaultChainId,
  });
}

const CONTEXT = {
  workflowId: "01JBENCHWORKFLOW0000000000",
  executionId: "01JBENCHEXECUTION000000000",
  executionIndex: 0,
  owner: "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4" as Address,
};

async function benchEngine(ctx: BenchContext, rounds: number, origin: string) {
  const { runtime } = ctx;
  const { definition, graph } = prepare(tenNodeBody(origin), runtime);
  const runInput = (): RunInput => ({
    mode: "run",
    definition,
    graph,
    context: { ...CONTEXT, chainId: definition.chainId },
    triggerOutput: { data: { minimum: 20 }, headers: {}, pathParams: {} },
    startAt: Date.now(),
    secrets: async () => ({}),
  });

  const viaEngine = timed(async () => {
    const result = await runWorkflow(runInput());
    const done = result.steps.find((s) => s.id === "done");
    if (result.status !== "success" || result.steps.length !== 11 || JSON.stringify(done?.output.data) !== EXPECTED_DONE) {
      throw new Error(`engine run: ${result.status} ${result.error ?? ""} ${JSON.stringify(result.steps.map((s) => [s.id, s.output]))}`);
    }
  });

  // The baseline: each node kind's run(config, env) in topological order with the variables of the outputs so
  // far, an env as small as the kinds allow (rendering through the same template functions), nothing else.
  const { limits, allowPrivateNetwork } = runtime.config;
  const nodes = new Map(definition.nodes.map((n) => [n.id, n]));
  const sandbox = new SandboxSession(CONTEXT.owner);
  const envOf = (nodeId: string, variables: Record<string, unknown>): NodeEnv => ({
    nodeId,
    now: () => runtime.now(),
    chainId: definition.chainId,
    variables,
    render: (config) => renderConfig(config, variables),
    renderText: (text) => renderString(text, variables),
    resolveWhole: (inputVariable) => {
      const path = wholeTemplatePath(inputVariable);
      if (!path) throw new TemplateUnresolvedError(inputVariable);
      return resolvePath(path, variables);
    },
    mode: "run",
    limits,
    sandbox,
    holdState: () => undefined,
    takeRequest: () => undefined,
    allowPrivateNetwork,
    child: (extra) => envOf(nodeId, { ...variables, ...extra }),
    runKind: (type, config, env) => kinds.node(type)!.run(config, env),
    writesOnChain: (type) => kinds.node(type)?.writesOnChain === true,
  });
  const direct = timed(async () => {
    const input = runInput();
    const shared = runVariables(input, {});
    const outputs: [string, Record<string, unknown>][] = [];
    for (const id of graph.order) {
      const node = nodes.get(id)!;
      const kind = kinds.node(node.type)!;
      const outcome = await kind.run(node.config, envOf(id, stepVariables(shared, outputs, Date.now())));
      if (isSuspend(outcome)) throw new Error("baseline: a node waits");
      const result: NodeResult = outcome;
      outputs.push([node.name, { data: result.data }]);
      if (kind.chosen && kind.chosen(result.data, id) !== "many") throw new Error("baseline: the branch chose another path");
    }
    if (JSON.stringify(outputs.at(-1)![1].data) !== EXPECTED_DONE) throw new Error(`baseline: ${JSON.stringify(outputs.at(-1))}`);
  });

  const [engine, plain] = await interleaved(rounds, [viaEngine, direct]);
  ctx.report("engine, 10 off-chain nodes", engine, "plain node calls", plain);
  const throughput = plain.p50 / engine.p50;
  const verdict = `${(1000 / engine.p50).toFixed(1)} vs ${(1000 / plain.p50).toFixed(1)} runs/s = ${throughput.toFixed(2)}x, goal ≥ ${ENGINE_GOAL}x ${throughput >= ENGINE_GOAL ? "met" : "NOT met"}`;
  note(ctx, verdict);
  console.log(`engine throughput (runs/s at p50, runWorkflow vs plain node calls): ${verdict}`);
}

// ---------------------------------------------------------------------------------------------------------
// 2. Blocking trigger → terminal

/** A new account signed in (`headers` carry its token and a JSON content type) with one wallet registered. */
export interface Owner {
  address: Address;
  headers: Record<string, string>;
  wallet: string;
}

/** Signs a new account in on the server at `base` and registers its wallet of salt `salt`. */
export async function newOwner(base: string, salt: string): Promise<Owner> {
  const account = privateKeyToAccount(generatePrivateKey());
  const headers = { Authorization: `Bearer ${await signInWithAccount(base, account)}`, "Content-Type": "application/json" };
  const res = await fetch(`${base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt }) });
  const { address: wallet } = (await res.json()) as { address: string };
  return { address: account.address, headers, wallet };
}

/** A workflow of `who`'s wallet: a manual trigger and one customCode node, runnable a million times; answers its id. */
export async function createOneNodeWorkflow(base: string, who: Owner, source = "return 1"): Promise<string> {
  const res = await fetch(`${base}/workflows`, {
    method: "POST",
    headers: who.headers,
    body: JSON.stringify({
      smartWalletAddress: who.wallet,
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [{ id: "one", name: "one", type: "customCode", config: { source } }],
      maxExecution: 1_000_000,
    }),
  });
  const body = (await res.json()) as { id?: string };
  if (res.status !== 201 || !body.id) throw new Error(`POST /workflows: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

/** Claims a pending execution of the workflow the way the trigger does, without handing it to any runner. */
async function claimPending(workflowId: string): Promise<{ id: string; workflow: WorkflowRecord }> {
  const now = Date.now();
  let id = "";
  const { workflow } = await claim(workflowId, {
    now,
    execution: (index, claimed) => {
      id = ulid(now);
      return ExecutionWrite.pendingItem({
        workflowId: claimed.id,
        owner: claimed.owner,
        chainId: claimed.chainId,
        id,
        index,
        startAt: now,
        executionFee: executionFee(),
        valueFee: valueFeeFor(claimed.nodes),
        triggerStep: {
          id: claimed.trigger.id,
          type: claimed.trigger.type,
          name: claimed.trigger.name,
          success: true,
          config: {},
          output: { data: {} },
          startAt: now,
          endAt: now,
        },
      });
    },
  });
  return { id, workflow };
}

const runOf = (workflow: WorkflowRecord, executionId: string): RunInput => {
  const { trigger, nodes, edges, inputVariables, chainId } = workflow;
  return {
    mode: "run",
    definition: { chainId, trigger, nodes, edges, inputVariables },
    graph: compileGraph({ trigger, nodes, edges }),
    context: { ...CONTEXT, workflowId: workflow.id, executionId, owner: workflow.owner as Address, chainId },
    triggerOutput: { data: {}, headers: {}, pathParams: {} },
    startAt: Date.now(),
    secrets: async () => ({}),
  };
};

/**
 * Baselines: (a) the engine alone on the same stored definition: what any trigger must at least spend running
 * the node; (b) what a blocking trigger cannot do without: the claim (GetItem of the workflow, its conditional
 * count UpdateItem and the PutItem of the pending record), the engine, and the finishing UpdateItem, called directly.
 * The difference to (b) is HTTP, auth and rate limit, the runner's started mark and run-input read, recording
 * the steps, the per-node stop check, the workflow's outcome and the final read of the answer.
 */
/**
 * `POST /nodes:run` of a one-line customCode (API.md §17.2) against `:simulate` of the same node behind a manual
 * trigger: the same capped simulated run, without the Execution's envelope. Both store nothing (0 requests to the table
 * beyond the rate limiter's).
 */
async function benchNodeRun(ctx: BenchContext, rounds: number, who: Owner) {
  const node = { id: "c", name: "c", type: "customCode", config: { source: "return 1 + 1" } };
  const post = (path: string, body: unknown, check: (answer: Record<string, unknown>) => boolean) =>
    timed(async () => {
      const res = await fetch(`${ctx.base}${path}`, { method: "POST", headers: who.headers, body: JSON.stringify(body) });
      const answer = (await res.json()) as Record<string, unknown>;
      if (res.status !== 200 || !check(answer)) throw new Error(`${path}: ${res.status} ${JSON.stringify(answer)}`);
    });
  const nodeRun = post("/nodes:run", { node }, (a) => a.success === true);
  const simulate = post(
    "/workflows:simulate",
    { trigger: { id: "t", name: "t", type: "manual", config: {} }, nodes: [node], inputVariables: {} },
    (a) => a.status === "success",
  );
  const [run, sim] = await interleaved(rounds, [nodeRun, simulate]);
  ctx.report("POST /nodes:run, one-line customCode", run, ":simulate of the same node", sim);
}

async function benchBlockingTrigger(ctx: BenchContext, rounds: number, who: Owner, workflowId: string) {
  const { runtime } = ctx;
  const workflow = (await getForRun(workflowId))!;
  let kinds: string[] = [];
  const recorder = {
    send: (command: object) => (kinds.push(command.constructor.name.replace(/Command$/, "")), runtime.db.send(command as never)),
  };
  const viaHttp = timed(async () => {
    kinds = [];
    setRuntime({ ...runtime, db: recorder as unknown as Runtime["db"] });
    const res = await fetch(`${ctx.base}/workflows/${workflowId}:trigger`, {
      method: "POST",
      headers: who.headers,
      body: JSON.stringify({ triggerType: "manual", isBlocking: true }),
    });
    const body = (await res.json()) as { status?: string };
    setRuntime(runtime);
    if (res.status !== 200 || body.status !== "success") throw new Error(`blocking trigger: ${res.status} ${JSON.stringify(body)}`);
  });
  const engineAlone = timed(async () => {
    const result = await runWorkflow(runOf(workflow, CONTEXT.executionId));
    if (result.status !== "success") throw new Error(`engine: ${result.status}`);
  });
  const claimRunFinish = timed(async () => {
    const { id, workflow: claimed } = await claimPending(workflowId);
    const result = await runWorkflow(runOf(claimed, id));
    if (result.status === "waiting") throw new Error("the bench workflow has no await node");
    if (!(await ExecutionWrite.finish(workflowId, id, { status: result.status, endAt: result.endAt, cogs: result.cogs })))
      throw new Error("finish: not pending");
  });

  const [trigger, engine, essential] = await interleaved(rounds, [viaHttp, engineAlone, claimRunFinish]);
  const name = `blocking trigger → terminal (${kinds.length} req)`;
  ctx.report(name, trigger, "runWorkflow alone", engine);
  note(ctx, `+${(trigger.p50 - engine.p50).toFixed(2)} ms`);
  ctx.report(name, trigger, "claim+engine+finish (4 req)", essential);
  note(ctx, `+${(trigger.p50 - essential.p50).toFixed(2)} ms`);
  console.log(`a blocking trigger's DynamoDB requests, in order: ${kinds.join(", ")}`);
}

// ---------------------------------------------------------------------------------------------------------
// 3. SSE: status write → frame

/**
 * A pending execution (claimed, never handed to a runner) with an open stream whose first frame has arrived;
 * then the clock starts, the terminal status is written, and it stops when the terminal frame arrives.
 * - notified: finish(), as the runner writes it in this process; the stream polls only every 5 s, so the
 *   frame comes from the in-process notification.
 * - polling alone: the same UpdateItem issued directly (as a runner in another process would: no notification
 *   here), stream interval 250 ms; the write lands at a spread of phases of the poll period.
 * Baseline: the same write and then one strongly consistent GetItem that observes the terminal status, the
 * least any reader learning of the change must spend.
 */
async function benchStream(ctx: BenchContext, rounds: number, who: Owner, workflowId: string) {
  const finish = (id: string) => ExecutionWrite.finish(workflowId, id, { status: "success", endAt: Date.now() });
  const finishElsewhere = (id: string) =>
    ctx.runtime.db.send(
      new UpdateCommand({
        TableName: ctx.runtime.config.tableName,
        Key: Keys.execution(workflowId, id),
        ConditionExpression: "#status = :pending",
        UpdateExpression: "SET #status = :status, endAt = :endAt REMOVE gsi2pk, gsi2sk, gsi3pk, gsi3sk",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: { ":status": "success", ":endAt": Date.now(), ":pending": "pending" },
      }),
    );
  const observed = async (id: string) => {
    const found = await readSummary(workflowId, id);
    if (found?.summary.status !== "success") throw new Error(`GetItem saw ${found?.summary.status}`);
  };

  const toFrame =
    (interval: number, write: (id: string) => Promise<unknown>) =>
    async (i: number): Promise<number> => {
      const { id } = await claimPending(workflowId);
      const stream = await openStream(`${ctx.base}/executions/${id}:stream?workflowId=${workflowId}&interval=${interval}`, who.headers);
      try {
        await stream.until('"status":"pending"');
        if (interval < 1000) await sleep((i * 37) % interval);
        const start = performance.now();
        await write(id);
        return (await stream.until('"status":"success"')) - start;
      } finally {
        stream.close();
      }
    };
  const writeAndRead = (write: (id: string) => Promise<unknown>) => async (): Promise<number> => {
    const { id } = await claimPending(workflowId);
    const start = performance.now();
    await write(id);
    await observed(id);
    return performance.now() - start;
  };

  const [notified, finishRead] = await interleaved(rounds, [toFrame(5000, finish), writeAndRead(finish)]);
  ctx.report("SSE write → frame, notified", notified, "finish()+GetItem", finishRead);
  note(ctx, `${rounds} rounds`);
  const [polled, updateRead] = await interleaved(rounds, [toFrame(250, finishElsewhere), writeAndRead(finishElsewhere)]);
  ctx.report("SSE write → frame, polling 250 ms", polled, "UpdateItem+GetItem", updateRead);
  note(ctx, `${rounds} rounds`);
}

// ---------------------------------------------------------------------------------------------------------

/** An SSE response read as it arrives; `until` resolves with the arrival time of the chunk that completed a match. */
async function openStream(url: string, headers: Record<string, string>) {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  if (res.status !== 200 || !res.body) throw new Error(`stream: ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let ended = false;
  return {
    async until(needle: string): Promise<number> {
      while (!text.includes(needle)) {
        if (ended) throw new Error(`stream closed without ${needle}: ${JSON.stringify(text)}`);
        const { done, value } = await reader.read();
        if (done) ended = true;
        else text += decoder.decode(value, { stream: true });
      }
      return performance.now();
    },
    close: () => controller.abort(),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
