/**
 * Per-test-file runtime on the suite's shared local components. Each file gets its own table, so files
 * running in parallel never see each other's items.
 */
import { inject } from "vitest";
import { randomUUID } from "node:crypto";
import { buildConfig } from "../../shared/config";
import { createRuntime, setRuntime, type Runtime } from "../../shared/runtime";
import { ensureTable } from "../../shared/store/table";

export function stackEnv(): Record<string, string> {
  return inject("stackEnv");
}

/** Sets up the runtime for this test file; `overrides` change settings (e.g. `{ MAX_SECRETS_PER_OWNER: "3" }`). */
export async function useTestRuntime(overrides: Record<string, string> = {}): Promise<Runtime> {
  const env = { ...stackEnv(), TABLE_NAME: `test-${randomUUID()}`, LOG_LEVEL: "error", ...overrides };
  const runtime = createRuntime({ config: buildConfig(env) });
  setRuntime(runtime);
  await ensureTable(runtime.db, runtime.config.tableName);
  return runtime;
}
