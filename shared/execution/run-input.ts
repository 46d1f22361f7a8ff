/**
 * The run input of an execution: what the claim hands the run besides the workflow (the trigger step's output and
 * `triggerInput`), stored with the execution by the claim and read by the runner. Kept apart from the runner so
 * that whatever claims executions (the trigger, schedules, the chain watcher) does not carry the engine.
 */
import { deleteInputParts, readInputParts, writeInputParts } from "../store/entities/execution-parts";
import { useRuntime } from "../current-runtime";

/** What the claim hands the run besides the workflow: the trigger step's output and `triggerInput`. */
export interface RunRequest {
  /** Absent for a block trigger without `triggerOutput`: the runner reads the latest block. */
  triggerOutput?: Record<string, unknown>;
  triggerInput?: Record<string, unknown>;
}

/**
 * Run inputs up to this size (JSON bytes) ride on the execution item; larger ones (manual data reaches 1 MiB) go in
 * parts, written once: on the item they would be rewritten by every write of the execution (the started mark, each
 * step, the finish) and by each of its index entries.
 */
const INLINE_INPUT_BYTES = 1_024;
const PART_BYTES = 350_000;

/**
 * Prepares the run input for the claim: attributes for the execution item, and (when large) parts written now,
 * before the claim, with `discard` to remove them when the claim is refused.
 */
export async function runInputStorage(
  executionId: string,
  request: RunRequest,
): Promise<{ attributes: Record<string, unknown>; discard: () => Promise<void> }> {
  const json = JSON.stringify(request);
  const bytes = Buffer.from(json, "utf8");
  if (bytes.length <= INLINE_INPUT_BYTES) return { attributes: { runInput: json }, discard: async () => {} };
  const parts = await writeInputParts(executionId, bytes, PART_BYTES, partsExpiry());
  return { attributes: { runInputParts: parts }, discard: () => deleteInputParts(executionId, parts) };
}

/**
 * Writes the run input's JSON in parts (whatever its size): a manual claim keeps those beside its marker when the
 * input is too large to keep there itself (shared/workflow/claim.ts). `discard` removes them.
 */
export async function writeRunInputParts(executionId: string, json: string): Promise<{ parts: number; discard: () => Promise<void> }> {
  const parts = await writeInputParts(executionId, Buffer.from(json, "utf8"), PART_BYTES, partsExpiry());
  return { parts, discard: () => deleteInputParts(executionId, parts) };
}

/** Parts are kept as long as an execution can still be started (timeout) with a wide margin; TTL removes them after. */
function partsExpiry(): number {
  const { config, now } = useRuntime();
  return Math.floor(now() / 1000) + Math.ceil(config.limits.executionTimeoutMs / 1000) + 24 * 3600;
}

/** The run input the claim stored with the execution (inline, or in parts). */
export async function readRunInput(executionId: string, execution: { runInput?: string; runInputParts?: number }): Promise<RunRequest> {
  if (execution.runInput !== undefined) return JSON.parse(execution.runInput) as RunRequest;
  if (!execution.runInputParts) return {};
  return JSON.parse((await readInputParts(executionId, execution.runInputParts)).toString("utf8")) as RunRequest;
}
