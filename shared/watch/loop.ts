/** The polling loop (AWS: one invocation a minute; locally: for as long as `npm start` runs). */
import type { PublicClient } from "viem";
import { ulid } from "ulid";
import { log } from "../log";
import { gaugeMetric } from "../metrics";
import { release } from "./checkpoint";
import { forget } from "./chain-watch";
import { watchChain } from "./pass";
import { isWatched } from "../workflow/watch-registry";
import { brief } from "./provider";
import type { WatchLimits } from "./types";
import { useRuntime } from "../current-runtime";

export interface LoopOptions {
  holder?: string;
  /** Pause between passes (default: half the fastest configured block time, 500 ms to 5 s). */
  pollMs?: number;
  /** Stop at this instant (ms); without it, until `stop()`. */
  until?: number;
  limits?: Partial<WatchLimits>;
  /** Clients by chain id (default: the configured RPCs'). */
  clients?: Record<number, PublicClient>;
}

/**
 * The chains with anything to watch (a block or event workflow, or a chain-event wait of an `await` node: both are
 * listed on the chain's watch partition): an invocation that finds none on any chain returns at once, so an idle
 * stage costs one Query per chain a minute.
 */
export async function watchedChains(): Promise<number[]> {
  const chains = useRuntime().config.chains.map((c) => c.chainId);
  const watched = await Promise.all(chains.map((chainId) => isWatched(chainId)));
  return chains.filter((_, i) => watched[i]);
}

/** Passes over every configured chain until `until` or `stop()`; leases are released at the end. */
export function startWatching(options: LoopOptions = {}): { stop: () => Promise<void>; done: Promise<void> } {
  const holder = options.holder ?? `watcher-${ulid()}`;
  const { config, now } = useRuntime();
  const fastest = Math.min(...config.chains.map((c) => (c.blockTimeSeconds ?? 12) * 1000), 10_000);
  const pollMs = options.pollMs ?? Math.min(5_000, Math.max(500, fastest / 2));
  let stopping = false;
  let wake: (() => void) | undefined;
  const failures = new Map<number, number>();
  const done = (async () => {
    while (!stopping && (options.until === undefined || now() < options.until)) {
      await Promise.all(
        config.chains.map((c) =>
          watchChain(c.chainId, {
            holder,
            waitMs: pollMs,
            ...(options.clients?.[c.chainId] ? { client: options.clients[c.chainId] } : {}),
            ...(options.until !== undefined ? { deadline: options.until } : {}),
            ...(options.limits ? { limits: options.limits } : {}),
          }).then(
            (pass) => {
              failures.delete(c.chainId);
              // How far the least advanced watched workflow is behind the head (infra/alarms.ts, WatcherLag).
              if (pass.status === "processed" && pass.from !== undefined && pass.to !== undefined)
                gaugeMetric("WatcherLagBlocks", Math.max(0, pass.to - pass.from), { ChainId: String(c.chainId) });
            },
            (err) => {
              // Once per doubling of consecutive failed passes, never once per pass.
              const n = (failures.get(c.chainId) ?? 0) + 1;
              failures.set(c.chainId, n);
              if ((n & (n - 1)) === 0) log.warn("watcher pass failed", { chainId: c.chainId, passes: n, error: brief(err) });
            },
          ),
        ),
      );
      const left = options.until === undefined ? pollMs : Math.min(pollMs, options.until - now());
      // A timer that holds the event loop: a Lambda invocation between passes is not an empty loop (NodeJsExit).
      if (left > 0 && !stopping) {
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => ((wake = resolve), (timer = setTimeout(resolve, left))));
        clearTimeout(timer);
      }
    }
    await Promise.all(config.chains.map((c) => forget(c.chainId, holder)));
    await Promise.all(config.chains.map((c) => release(c.chainId, holder).catch(() => undefined)));
  })();
  return {
    done,
    stop: async () => {
      stopping = true;
      wake?.();
      await done;
    },
  };
}
