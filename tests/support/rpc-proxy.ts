/**
 * A small JSON-RPC proxy in front of the devnet that refuses `eth_getLogs` the way hosted providers do: more than
 * `maxAddresses` addresses, a block range wider than `maxRange`, more than `maxResults` logs in the answer
 * (Infura's "query returned more than N results", code -32005), or any request naming an address of `failAddresses`
 * (an internal error, every time). Rules can be changed while it runs. Every `eth_getLogs` is recorded with how it
 * was answered, and the method of every call in `methods`. With `down` every request is answered HTTP 503, as a
 * provider that is unavailable; a method in `failMethods` is answered with an internal JSON-RPC error. In front of
 * a bundler, `faults` troubles calls of a method: "lose-answer" forwards the call and answers HTTP 502 (the answer
 * lost on its way back), "lose-request" answers 502 without forwarding (lost on its way there), "hold" neither
 * forwards nor answers (the request hangs until the proxy closes), "refuse" answers a JSON-RPC error with `message`
 * without forwarding, each for its `count` next calls or for all. Every call's method and params are recorded in
 * `calls`. Everything else is passed through unchanged.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ProxyRules {
  maxAddresses?: number;
  maxRange?: number;
  maxResults?: number;
  failAddresses?: Set<string>;
  /** Answer every request with HTTP 503 (the provider is unavailable). */
  down?: boolean;
  /** Answer calls of these methods with a JSON-RPC internal error (-32603). */
  failMethods?: Set<string>;
  /** Trouble calls of a method (see the module header), for its `count` next calls or (without) for all. */
  faults?: Record<string, { kind: "lose-answer" | "lose-request" | "hold" | "refuse"; message?: string; count?: number }>;
}

interface GetLogsSeen {
  addresses: string[];
  from: number;
  to: number;
  outcome: "ok" | "addresses" | "range" | "results" | "failed";
  results?: number;
}

export interface RpcProxy {
  url: string;
  rules: ProxyRules;
  getLogs: GetLogsSeen[];
  /** The JSON-RPC method of every call received (a batch's each), in order, answered or not. */
  methods: string[];
  /** Every single (non-batch) call received, with its params, in order. */
  calls: { method: string; params: unknown[] }[];
  close(): Promise<void>;
}

export async function startRpcProxy(target: string, rules: ProxyRules = {}): Promise<RpcProxy> {
  const getLogs: GetLogsSeen[] = [];
  const methods: string[] = [];
  const calls: RpcProxy["calls"] = [];
  const proxy: RpcProxy = { url: "", rules, getLogs, methods, calls, close: async () => undefined };

  const forward = async (body: string) => {
    const res = await fetch(target, { method: "POST", headers: { "Content-Type": "application/json" }, body });
    return res.text();
  };
  const answer = (res: ServerResponse, status: number, body: string) => {
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  };
  const refuse = (id: unknown, code: number, message: string) => JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const call = JSON.parse(body) as { id: unknown; method: string; params?: unknown[] };
    for (const one of Array.isArray(call) ? (call as { method: string }[]) : [call]) methods.push(one.method);
    if (!Array.isArray(call)) calls.push({ method: call.method, params: call.params ?? [] });
    if (proxy.rules.down) return answer(res, 503, JSON.stringify({ error: "service unavailable" }));
    const fault = Array.isArray(call) ? undefined : proxy.rules.faults?.[call.method];
    if (fault && (fault.count === undefined || fault.count > 0)) {
      if (fault.count !== undefined) fault.count -= 1;
      if (fault.kind === "hold") return; // never forwarded, never answered
      if (fault.kind === "refuse") return answer(res, 200, refuse(call.id, -32602, fault.message ?? "refused"));
      if (fault.kind === "lose-answer") await forward(body);
      return answer(res, 502, JSON.stringify({ error: "bad gateway" }));
    }
    if (!Array.isArray(call) && proxy.rules.failMethods?.has(call.method)) {
      return answer(res, 200, refuse(call.id, -32603, "internal error"));
    }
    if (Array.isArray(call) || call.method !== "eth_getLogs") return answer(res, 200, await forward(body));

    const filter = (call.params?.[0] ?? {}) as { address?: string | string[]; fromBlock?: string; toBlock?: string };
    const addresses = (Array.isArray(filter.address) ? filter.address : filter.address ? [filter.address] : []).map((a) => a.toLowerCase());
    const from = parseInt(filter.fromBlock ?? "0x0", 16);
    const to = parseInt(filter.toBlock ?? "0x0", 16);
    const seen: GetLogsSeen = { addresses, from, to, outcome: "ok" };
    getLogs.push(seen);
    const r = proxy.rules;
    if (r.failAddresses && addresses.some((a) => r.failAddresses!.has(a))) {
      seen.outcome = "failed";
      return answer(res, 200, refuse(call.id, -32603, "internal error: upstream unavailable"));
    }
    if (r.maxAddresses !== undefined && addresses.length > r.maxAddresses) {
      seen.outcome = "addresses";
      return answer(res, 200, refuse(call.id, -32602, `too many addresses in filter: at most ${r.maxAddresses} allowed`));
    }
    if (r.maxRange !== undefined && to - from + 1 > r.maxRange) {
      seen.outcome = "range";
      return answer(res, 200, refuse(call.id, -32602, `block range too large: at most ${r.maxRange} blocks`));
    }
    const text = await forward(body);
    if (r.maxResults !== undefined) {
      const results = (JSON.parse(text) as { result?: unknown[] }).result?.length ?? 0;
      seen.results = results;
      if (results > r.maxResults) {
        seen.outcome = "results";
        return answer(res, 200, refuse(call.id, -32005, `query returned more than ${r.maxResults} results`));
      }
    }
    answer(res, 200, text);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => answer(res, 502, JSON.stringify({ error: err.message })));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections(); // held requests too
    });
  return proxy;
}
