/** The sweeper (API.md §10.3): ends the executions still pending past `execution_timeout_ms`. */
import { pendingBefore } from "../store/entities/execution";
import { finish } from "./execution-write";
import { useRuntime } from "../current-runtime";

/**
 * Ends every execution still pending `execution_timeout_ms` after its start with `error` "execution timed out"
 * (API.md §10.3). The run, if alive, starts no further node: its shouldStop sees the execution terminal.
 */
export async function sweep(
  now = useRuntime().now(),
  max = 100,
): Promise<{ checked: number; timedOut: { workflowId: string; id: string }[] }> {
  const pending = await pendingBefore(now - useRuntime().config.limits.executionTimeoutMs, max);
  const timedOut: { workflowId: string; id: string }[] = [];
  for (const item of pending) {
    if (await finish(item.workflowId, item.id, { status: "error", error: "execution timed out", endAt: now })) timedOut.push(item);
  }
  return { checked: pending.length, timedOut };
}
