/**
 * Per-test-file runtime on the suite's shared local components. Each file gets its own table, so files
 * running in parallel never see each other's items.
 */
import { inject } from "vitest";
import { randomUUID } from "node:crypto";
import { buildConfig } from "../../shared/config";
import { createRuntime } from "../../shared/runtime";
import { ensureTable } from "../../shared/store/table";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

export function stackEnv(): Record<string, string> {
  return inject("stackEnv");
}

/** Sets up the runtime for this test file; `overrides` change settings (e.g. `{ MAX_SECRETS_PER_OWNER: "3" }`). */
export async function useTestRuntime(overrides: Record<string, string> = {}): Promise<Runtime> {
  const env = { ...stackEnv(), TABLE_NAME: `test-${randomUUID()}`, ...overrides };
  const runtime = createRuntime({ config: buildConfig(env) });
  setRuntime(runtime);
  await ensureTable(runtime.db, runtime.config.tableName);
  return runtime;
}

const CLOSED = "http://127.0.0.1:1";

/**
 * A runtime with settings only, for `*.unit.test.ts` files (vitest.config.ts): no local components. Its DynamoDB
 * client and its chain's RPC point at a closed port, so a test that reaches either fails at once and belongs in
 * `stack`. Loopback is reachable, as on the stack, for a test's own servers.
 */
export function useConfigRuntime(overrides: Record<string, string> = {}): Runtime {
  const env = {
    DYNAMODB_ENDPOINT: CLOSED,
    CHAINS: JSON.stringify([{ chainId: 31337, rpcUrl: CLOSED }]),
    ALLOW_PRIVATE_NETWORK: "true",
    ...overrides,
  };
  const runtime = createRuntime({ config: buildConfig(env) });
  setRuntime(runtime);
  return runtime;
}
