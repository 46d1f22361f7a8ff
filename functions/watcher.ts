/**
 * The chain watcher (shared/watch/README.md), started every minute by infra/watcher.ts: it passes over every
 * configured chain about twice per block time and stops just before the next start, so a fire follows its block
 * within about one block time. Each chain's checkpoint lease keeps an overlapping invocation off the same range.
 * Everything it starts is awaited and the leases are released before it returns (nothing runs frozen).
 */
import type { Context } from "aws-lambda";
import { awsBus, invocation, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { startWatching, watchedChains } from "../shared/watch/loop";

// Fires reach the runner function through the runner queue (infra/bus.ts).
wireAws(awsBus, awsScheduler);

/** Left for the last pass to finish and the leases to be released before the function's timeout. */
const MARGIN_MS = 8_000;

export const handler = invocation(async (_event: unknown, context: Context) => {
  // An idle stage (no block or event workflow on any chain) stops here: a Query per chain, no RPC, no lease.
  if ((await watchedChains()).length === 0) return;
  const until = Date.now() + Math.min(context.getRemainingTimeInMillis() - MARGIN_MS, 55_000);
  await startWatching({ holder: `watcher-${context.awsRequestId}`, until }).done;
});
