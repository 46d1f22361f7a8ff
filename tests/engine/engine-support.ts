/**
 * Helpers for the engine tests: a definition validated the way `:simulate` validates one (so the engine runs
 * exactly what the routes would give it), a run with sensible defaults, a recording fake of the SendCalls
 * port, and a loopback HTTP server whose routes a test sets.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { validateDefinition } from "../../shared/workflow/definition";
import { runWorkflow } from "../../shared/engine/run";
import type { RunInput } from "../../shared/engine/types";
import { useConfig } from "../../shared/current-runtime";
import { DEFAULT_LIMITS } from "../../shared/kinds/support/schema-kit";
import type { SendCalls, SendOutcome } from "../../shared/wallet/send";
import type { Step } from "../../shared/engine/schemas";

const OWNER = "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4";
export const WALLET = "0xAb8483F64d9C6d1EcF9b849Ae677dD3315835cb2";
const CHAIN = 31337;

export interface Body {
  trigger?: Record<string, unknown>;
  nodes: Record<string, unknown>[];
  edges?: Record<string, unknown>[];
  inputVariables?: Record<string, unknown>;
}

export const manualTrigger = { id: "trig", name: "trigger1", type: "manual", config: { data: { greeting: "hi" } } };

/** Validates the body as `:simulate` does (graph compiled, defaults filled in). */
function prepare(body: Body) {
  const config = useConfig();
  return validateDefinition(
    {
      chainId: CHAIN,
      trigger: body.trigger ?? manualTrigger,
      nodes: body.nodes,
      ...(body.edges ? { edges: body.edges } : {}),
      // The runner the context names (simulate requires it with writes); a test may set its own settings.
      inputVariables: { settings: { runner: WALLET }, ...body.inputVariables },
    },
    {
      mode: "simulate",
      now: Date.now(),
      limits: { ...DEFAULT_LIMITS, ...config.limits },
      chains: config.chains,
      defaultChainId: config.defaultChainId,
    },
  );
}

/** Runs the body with defaults: mode run, no secrets, the manual trigger output `{data, headers, pathParams}`. */
export function run(body: Body, overrides: Partial<RunInput> = {}) {
  const { definition, graph } = prepare(body);
  return runWorkflow({
    mode: "run",
    definition,
    graph,
    context: {
      workflowId: "01JWORKFLOW0000000000000000",
      executionId: "01JEXECUTION000000000000000",
      executionIndex: 0,
      owner: OWNER,
      smartWalletAddress: WALLET,
      chainId: CHAIN,
    },
    triggerOutput: { data: { items: [1, 2, 3], greeting: "hi" }, headers: {}, pathParams: {} },
    startAt: Date.now(),
    secrets: async () => ({}),
    ...overrides,
  });
}

export const stepOf = (steps: Step[], id: string) => steps.find((s) => s.id === id);
export const ids = (steps: Step[]) => steps.map((s) => s.id);

export const code = (id: string, source: string, name = id) => ({ id, name, type: "customCode", config: { source } });
export const edge = (source: string, target: string) => ({ id: `${source}-${target}`.replace(/\./g, "_"), source, target });

/** A SendCalls that records each request and answers with the next outcome (default: success). */
export function fakeSender(outcomes: SendOutcome[] = []) {
  const requests: Parameters<SendCalls>[0][] = [];
  let n = 0;
  const send: SendCalls = async (request) => {
    requests.push(request);
    n++;
    return outcomes.shift() ?? success(n);
  };
  return { send, requests };
}

const success = (n = 1, gasUsed = 100_000n, totalGasCost = 100_000n * 3n): SendOutcome => ({
  ok: true,
  userOpHash: `0x${String(n).padStart(64, "a")}`,
  transactionHash: `0x${String(n).padStart(64, "b")}`,
  blockNumber: 100n + BigInt(n),
  gasUsed,
  gasPrice: totalGasCost / gasUsed,
  totalGasCost,
  deployed: n === 1,
});

export type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A loopback server; routes by path (`routes` may change while it runs); records every request and counts connections. */
export async function startServer(routes: Record<string, Handler>) {
  const seen: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const route = routes[new URL(req.url!, "http://x").pathname];
      if (route) route(req, res, body);
      else res.writeHead(404, { "content-type": "text/plain" }).end("no such route");
    });
  });
  server.on("connection", () => connections++);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    seen,
    connections: () => connections,
    routes,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}

export const json = (res: ServerResponse, status: number, value: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));

/**
 * A rendezvous for `count` requests: each is answered only once all have arrived (or, after `patienceMs`,
 * with 504), so a run that sent them one after another fails instead of passing slowly.
 */
export function barrier(count: number, patienceMs = 10_000): Handler {
  const waiting: ServerResponse[] = [];
  return (_req, res) => {
    waiting.push(res);
    if (waiting.length === count) for (const r of waiting.splice(0)) json(r, 200, { met: count });
    else setTimeout(() => !res.writableEnded && json(res, 504, { met: false }), patienceMs).unref();
  };
}
