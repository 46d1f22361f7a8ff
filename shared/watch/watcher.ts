/**
 * The chain watcher (API.md §8.3.4-§8.3.7, §18.4): passes over a chain turn the blocks mined since the last pass into
 * fires of the block- and event-triggered workflows watching that chain (shared/workflow/watch-registry.ts), so
 * that one owner's queries can neither stop nor delay another owner's fires.
 *
 * Requests. The event queries are asked in bounded request groups (plan.ts): each carries one owner's queries, at
 * most 1,000 addresses and per topic position at most 10 values, and a query without addresses never shares a
 * request with one that has some. A group asks for the blocks after its members' progress, at most
 * LOGS_RANGE_BLOCKS at a time. A provider's refusal is read (`classify`): a block range too large halves the range
 * (for the whole chain when the provider names the range, else for that group), too many addresses lowers the
 * chain's address bound (groups are packed again), too many results for a single block splits the group's queries
 * in two; anything else is a failure: the group's workflows wait, retried with exponential backoff (2 s doubling to
 * 5 min), logged once per backoff step (one warning per failed attempt, never one per pass; the provider's message
 * is cut to 200 characters, never the request). A group answered with more than `maxLogsPerResponse` logs is
 * treated as too many results too, so no answer holds an unbounded number of logs in memory.
 *
 * Fairness. Each pass starts at most `requestsPerPass` requests (32), dealt round robin across owners from an
 * owner that moves on each pass; an owner's groups go most-behind first. At most `maxInFlight` (8) requests are in
 * flight per chain, at most half of them one owner's, and an owner with none in flight may always start one, so a
 * slow or hanging provider answer for one owner never keeps another's request from starting. An owner whose
 * queries need many requests gets them over more passes; a pass waits for its requests at most `waitMs` (the
 * polling loop: its poll interval), and answers that come later are taken up by the next pass. Another owner's fire
 * thus follows its block by about one block time plus the poll interval.
 *
 * Matching. A group's answer is read and matched in slices that give the event loop back every few milliseconds,
 * against an index of the group's queries by (address, topics[0]) (match.ts), never against every query of the
 * chain; each log is decoded once per ABI. Fires are claimed per owner: at most `firesPerOwnerPerPass` (100) claims
 * of one owner per pass, the claims of all owners through 16 slots taken in turn by owner. The fires of an answer
 * that are not claimed yet wait for the next pass, and the group asks for nothing more until they are: its
 * progress moves only when every fire of the range has been claimed.
 *
 * Progress. Every member of a group (a workflow's query, or part of it) and every block trigger has its own
 * progress: the last block whose fires are all claimed. A group asks from its least advanced member; a member
 * skips blocks it has already done. A workflow's cursor is the least progress of its queries; the checkpoint item
 * (store pattern 18, `CHAIN#<id>` / `CHECKPOINT`) keeps `block` (the head of the last pass: where every workflow not
 * listed, and every new one, stands) and `behind` (workflow → cursor, for those not at `block`; past
 * `maxBehindEntries` of them, the owners with most are kept as one lowest cursor each in `floors`). So a group that
 * lags (many requests, failures, fires carried over) catches up by itself without holding any other back, and a
 * restart resumes every workflow where it stood. Each fire is claimed with its fire id (§8.3.7: the block number,
 * or the transaction hash and the log's position in that transaction), so a range done again (a restart, a
 * rewound checkpoint, a query asked by two groups after its owner's groups were packed again) creates nothing twice.
 *
 * A pass:
 * 1. takes the chain's lease on the checkpoint with one conditional update (two overlapping invocations never
 *    process the chain at once); the lease is released when the invocation ends;
 * 2. reads the watch entries and await watch entries (small items; large triggers and queries read once per
 *    process) and the latest block; with no checkpoint yet (a new deployment) or no watcher the checkpoint just moves
 *    to the head: nothing before it fires;
 * 3. packs each owner's queries into groups again only when that owner's workflows changed;
 * 4. settles every member's progress (at most `max_catchup_blocks` behind the head: older blocks are skipped with a
 *    warning, §8.3.7), makes the block triggers' fires (one header read per firing block, shared), deals the
 *    requests, matches their answers and claims fires as answers come in;
 * 5. writes the cursors back with the lease held.
 *
 * Waits. A chain-event wait of an `await` node (API.md §17.1; its await watch entry, store pattern 19b, listed with
 * the watch entries) is served as one more event watcher of the execution's owner, keyed `await:<executionId>:
 * <nodeId>` wherever a workflow is keyed by its id (members, `behind`): its queries ride that owner's request groups
 * from `afterBlock + 1` (the head when the wait began), and a chain with only waits is watched. It ends with ONE
 * log, the first matching one in (block, log index) order once every member of the wait has passed that block:
 * `endWaitByEvent` (shared/execution/waits.ts) gets the output an event trigger's fire would carry for it, then the
 * entry is deleted (chain-waits.ts).
 *
 * Blocks older than a watch entry's `since` never fire for it, nor blocks outside `[startAt, expiredAt)`; a workflow
 * that is deleted or no longer runnable loses its entry. Blocks are processed at the head (no confirmation depth);
 * a block re-mined by a short reorganisation does not fire again (fire ids never name a block hash).
 *
 * The modules: types.ts (limits, options, results), checkpoint.ts (the lease and the cursors' item), plan.ts (request
 * groups), match.ts (matching), provider.ts (refusals), pass-state.ts (what a chain's state and a pass keep), the
 * chain's watch (chain-watch.ts: one per holder, its epoch, its cursors' write) and the collaborators it owns:
 * chain-plans.ts (plans, progress keys), chain-reader.ts (headers, receipts), chain-fires.ts (fires and carry-over),
 * chain-waits.ts (chain-event waits), chain-requests.ts (requests, refusals and backoff);
 * fire.ts (a fire's claim), pass.ts (a pass), loop.ts (the polling loop). This file re-exports what callers use.
 */
export { holds, matchLog, mergedFilter } from "./match";
export { type PassOptions, type PassResult } from "./types";
export { release } from "./checkpoint";
export { fireExecution } from "./fire";
export { watchChain } from "./pass";
export { startWatching, watchedChains } from "./loop";
