/**
 * The trigger step's `output` (API.md §8.3.6) for a manual run (§8.8.7 `triggerOutput`) or a simulation:
 * - manual: `{data, headers, pathParams}`, each from `triggerOutput` when sent, else the trigger config;
 * - other kinds: `{data: triggerOutput}` verbatim when sent, else what the service observes: fixedTime and cron
 *   the run's instant, block the latest block of its chain (read at run time), event `null`.
 * Only the block read needs I/O, so `needsChainRead` tells the caller whether the output is known at claim time.
 */
import type { Trigger } from "../kinds/shapes";

/** The block fields of a block trigger's output, as viem's getBlock answers them. */
export interface ObservedBlock {
  number: bigint | null;
  hash: string | null;
  parentHash: string;
  timestamp: bigint;
  gasLimit: bigint;
  gasUsed: bigint;
}

const isoMs = (ms: number) => new Date(ms).toISOString();

/** True when the output must wait for a chain read at run time (a block trigger without `triggerOutput`). */
export const needsChainRead = (trigger: Pick<Trigger, "type">, triggerOutput: Record<string, unknown> | undefined) =>
  trigger.type === "block" && triggerOutput === undefined;

/** The output when it needs no I/O; throws for a block trigger without `triggerOutput` (see `needsChainRead`). */
export function triggerStepOutput(
  trigger: Trigger,
  triggerOutput: Record<string, unknown> | undefined,
  now: number,
): Record<string, unknown> {
  switch (trigger.type) {
    case "manual": {
      const sent = triggerOutput ?? {};
      return {
        data: sent.data ?? trigger.config.data ?? null,
        headers: sent.headers ?? trigger.config.headers ?? {},
        pathParams: sent.pathParams ?? trigger.config.pathParams ?? {},
      };
    }
    case "fixedTime":
    case "cron":
      return { data: triggerOutput ?? { timestamp: now, timestampIso: isoMs(now) } };
    case "event":
      return { data: triggerOutput ?? null };
    case "block":
      if (triggerOutput === undefined) throw new Error("a block trigger's output needs the latest block (blockStepOutput)");
      return { data: triggerOutput };
  }
}

/** A block trigger's output from an observed block. */
export function blockStepOutput(block: ObservedBlock): Record<string, unknown> {
  return {
    data: {
      blockNumber: Number(block.number ?? 0n),
      blockHash: block.hash,
      parentHash: block.parentHash,
      timestamp: Number(block.timestamp) * 1000,
      gasLimit: block.gasLimit.toString(),
      gasUsed: block.gasUsed.toString(),
    },
  };
}
