/**
 * The bounds of what an execution records and answers: a step's output, log and error (API.md §10.2) and a
 * whole record (API.md §18.2).
 */
import type { Execution } from "./schemas";
import { useRuntime } from "../current-runtime";
import type { Step } from "../engine/schemas";

type Limits = ReturnType<typeof useRuntime>["config"]["limits"];

const TRUNCATED = "…[truncated]";

// ---------------------------------------------------------------------------------------------------------
// Bounds of an answer (API.md §18.2)

/** A last-resort log or error keeps this many bytes (API.md §10.2's `…[truncated]` form). */
const LAST_RESORT_TEXT_BYTES = 256;

/**
 * Brings `execution` within `max` serialized bytes, in place. `outputs[i]` is step i's recorded output size and
 * whether the step holds it (`held`) or carries `null` in its place until it is read. While too large, the
 * largest outputs are replaced with `{data: null, truncated: true, originalSize}` (API.md §18.2, §10.2); should
 * every output be replaced and the record still pass `max` (up to 101 steps each with a 64 KiB log and error),
 * the largest logs and errors are cut to LAST_RESORT_TEXT_BYTES and configs and inputs (optional, the
 * workflow's own) are left out, largest first. Sizes are computed, not measured: each output is serialized
 * once. Returns the indexes of the steps whose output is kept but not held, in step order: the caller reads them.
 */
export function fitRecord(execution: Execution, outputs: { bytes: number; held: boolean }[], max: number): number[] {
  const steps = execution.steps;
  const size = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
  const NULL_BYTES = 4;
  const marker = (originalSize: number) => ({ data: null, truncated: true as const, originalSize });
  // With every output in place: the record with `null` outputs, then each output's own bytes instead of `null`.
  let total = size({ ...execution, steps: steps.map((s) => ({ ...s, output: null })) });
  for (const o of outputs) total += o.bytes - NULL_BYTES;
  const replaced = new Set<number>();
  if (total > max) {
    const isMarker = (i: number) => outputs[i]!.held && (steps[i]!.output as { truncated?: unknown } | null)?.truncated === true;
    const candidates = steps
      .map((_, i) => i)
      .filter((i) => !isMarker(i) && size(marker(outputs[i]!.bytes)) < outputs[i]!.bytes)
      .sort((a, b) => outputs[b]!.bytes - outputs[a]!.bytes || a - b);
    for (const i of candidates) {
      if (total <= max) break;
      const replacement = marker(outputs[i]!.bytes);
      total -= outputs[i]!.bytes - size(replacement);
      steps[i]!.output = replacement;
      replaced.add(i);
    }
  }
  if (total > max) {
    type Cut = { i: number; field: "log" | "error" | "config" | "inputs"; bytes: number };
    const cuts: Cut[] = steps.flatMap((s, i) =>
      (["log", "error", "config", "inputs"] as const)
        .filter((f) => s[f] !== undefined)
        .map((field) => ({ i, field, bytes: size(s[field]) })),
    );
    cuts.sort((a, b) => b.bytes - a.bytes || a.i - b.i);
    for (const cut of cuts) {
      if (total <= max) break;
      const step = steps[cut.i]!;
      if (cut.field === "log" || cut.field === "error") {
        const shorter = truncate(step[cut.field]!, LAST_RESORT_TEXT_BYTES);
        total -= cut.bytes - size(shorter);
        step[cut.field] = shorter;
      } else {
        // The member goes with its key, its colon and one comma.
        total -= size(cut.field) + 1 + cut.bytes + 1;
        delete step[cut.field];
      }
    }
  }
  return steps.map((_, i) => i).filter((i) => !outputs[i]!.held && !replaced.has(i));
}

/**
 * Brings an assembled execution (every output it keeps held) of `rawBytes` serialized within `budget` bytes as a
 * Lambda envelope escapes it (`escapedBytes` now: shared/http/answer-bytes.ts). Every byte an output, log or
 * config gives up takes at least one escaped byte with it (a marker's six quotes aside: the envelope's headroom
 * holds those), so asking fitRecord for as many bytes fewer as the escaped form is over is enough.
 */
export function fitEscaped(execution: Execution, rawBytes: number, escapedBytes: number, budget: number): void {
  const outputs = execution.steps.map((s) => ({ bytes: Buffer.byteLength(JSON.stringify(s.output)), held: true }));
  fitRecord(execution, outputs, rawBytes - (escapedBytes - budget));
}

// ---------------------------------------------------------------------------------------------------------
// Bounds of a recorded step (API.md §10.2)

export function boundStep(step: Step, limits: Limits): Step {
  const out: Step = { ...step };
  const outputBytes = Buffer.byteLength(JSON.stringify(step.output));
  if (outputBytes > limits.maxStepOutputBytes) out.output = { data: null, truncated: true, originalSize: outputBytes };
  if (step.log !== undefined) out.log = truncate(step.log, limits.maxStepLogBytes);
  if (step.error !== undefined) out.error = truncate(step.error, limits.maxStepLogBytes);
  return out;
}

/** At most `max` UTF-8 bytes, ending with `…[truncated]` when cut (never inside a character). */
function truncate(text: string, max: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let cut = Math.max(0, max - Buffer.byteLength(TRUNCATED));
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut -= 1;
  return bytes.subarray(0, cut).toString("utf8") + TRUNCATED;
}
