/**
 * `GET /health` (API.md §6.1): 200 whenever the process can answer; the body says whether the dependencies
 * answer too. Three checks run in parallel, each bounded by a 2 s timeout: the datastore (DescribeTable on
 * our table), the key service (DescribeKey on the secrets key) and the default chain's RPC (eth_chainId, which
 * must name the configured chain). The verdict is cached per runtime for up to 10 s, so a burst of probes
 * costs one round of checks.
 */
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { DescribeKeyCommand } from "@aws-sdk/client-kms";
import { useKms } from "../envelope/kms";
import { route, type Route } from "../http/app";
import * as Service from "./endpoints";
import { log } from "../log";
import { useRuntime, type Runtime } from "../current-runtime";

const CHECK_TIMEOUT_MS = 2_000;
const CACHE_MS = 10_000;

interface HealthChecks {
  datastore: boolean;
  keyService: boolean;
  chainRpc: boolean;
}

const cache = new WeakMap<Runtime, { at: number; checks: Promise<HealthChecks> }>();

/** The dependency checks, cached for up to 10 s (runtime clock). Never rejects. */
function checkDependencies(runtime: Runtime = useRuntime()): Promise<HealthChecks> {
  const now = runtime.now();
  const hit = cache.get(runtime);
  if (hit && now - hit.at >= 0 && now - hit.at < CACHE_MS) return hit.checks;
  const checks = (async () => {
    const [datastore, keyService, chainRpc] = await Promise.all([
      passes("datastore", () => checkDatastore(runtime)),
      passes("keyService", () => checkKeyService(runtime)),
      passes("chainRpc", () => checkChainRpc(runtime)),
    ]);
    return { datastore, keyService, chainRpc };
  })();
  cache.set(runtime, { at: now, checks });
  return checks;
}

async function passes(name: string, check: () => Promise<void>): Promise<boolean> {
  try {
    await check();
    return true;
  } catch (err) {
    log.warn("health check failed", { check: name, error: err instanceof Error ? err.message : String(err) });
    return false;
  }
}

async function checkDatastore(runtime: Runtime) {
  await runtime.db.send(new DescribeTableCommand({ TableName: runtime.config.tableName }), {
    abortSignal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
  });
}

/** DescribeKey on the secrets key: the endpoint answers and the key exists (the local endpoint creates it on first use). */
async function checkKeyService(runtime: Runtime) {
  await useKms(runtime).send(new DescribeKeyCommand({ KeyId: runtime.config.secretsKeyId }), {
    abortSignal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
  });
}

async function checkChainRpc(runtime: Runtime) {
  const { chains, defaultChainId } = runtime.config;
  const chain = chains.find((c) => c.chainId === defaultChainId);
  if (!chain) throw new Error(`default chain ${defaultChainId} is not configured`);
  const response = await fetch(chain.rpcUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
  });
  if (!response.ok) throw new Error(`RPC answered HTTP ${response.status}`);
  const body = (await response.json()) as { result?: unknown };
  if (typeof body.result !== "string" || Number(BigInt(body.result)) !== defaultChainId) {
    throw new Error(`RPC answered chain ${String(body.result)}, expected ${defaultChainId}`);
  }
}

export const healthRoutes: Route[] = [
  route(Service.health, async (c) => {
    const { config } = useRuntime();
    let ok = false;
    try {
      const checks = await checkDependencies();
      ok = checks.datastore && checks.keyService && checks.chainRpc;
    } catch {
      ok = false; // checkDependencies never rejects; this guards the "200 always" promise regardless
    }
    return c.json({ status: ok ? "ok" : "degraded", version: config.serviceVersion, chainId: config.defaultChainId }, 200);
  }),
];
