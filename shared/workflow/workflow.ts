/**
 * Workflows (API.md §8.1, §8.2, §8.7 items 8-10, §8.8.1-§8.8.6): the stored record, its effective status, the
 * active-workflow cap, and the claim that starts an execution.
 *
 * Access patterns (shared/store/README.md); keys, conditions and Queries are the entities' (shared/store/entities/):
 *
 * | Who / when                         | Reads or writes                                         | Entity (pattern)                             |
 * |------------------------------------|---------------------------------------------------------|----------------------------------------------|
 * | create                             | the caller's wallets (1 Query, keys only)               | workflow.ts isOwnersWallet                   |
 * |                                    | record + active counter (1 TransactWriteItems)          | workflow.ts createItem (10-12), counters     |
 * | retrieve, pause, resume, delete    | the record (1 strongly consistent GetItem)              | workflow.ts readWorkflowItem (10)            |
 * | list, count                        | the owner's workflows newest first (Query)              | workflow.ts listQuery: gsi1 (11)             |
 * | list, count with one wallet        | that wallet's workflows newest first (Query)            | workflow.ts listQuery: gsi2 (12)             |
 * | manual claim (trigger)             | 1 conditional UpdateItem (count, marker, run input),    | workflow.ts takeIndex (10),                  |
 * |                                    | PutItem (execution); the journal once per workflow,     | putClaimedExecution, claim-intent.ts         |
 * |                                    | process and minute (./claim.ts, "Claiming")             | journalWorkflows (22)                        |
 * | fire's claim (scheduler, watcher)  | fire record PutItem, the count UpdateItem, PutItem      | claim-intent.ts putIntent (17), takeIndex,   |
 * |                                    | (execution), fire record UpdateItem (closed)            | putClaimedExecution, closeIntent             |
 * | claim recovery (sweeper)           | fires' intents in flight (Query) + per intent GetItem   | claim-intent.ts intentsInFlightBefore (17),  |
 * |                                    | (execution), GetItem (record), steps left; journals due | journalsDue (22), readWorkflowItem,          |
 * |                                    | (Query) + per workflow GetItem, per stale marker        | executionWritten, removeClaimAttributes      |
 * |                                    | GetItem (execution), 1 UpdateItem (markers removed)     |                                              |
 * | expiry pass (sweeper)              | due expiry entries oldest first (Query) + per workflow   | expiry.ts dueExpiries (21)                   |
 * |                                    | GetItem + 1 TransactWriteItems (record + counter)       | workflow.ts completeItem, counters           |
 *
 * Effective status (§8.2): a record stored `enabled` or `disabled` whose `expiredAt` is at or before now reads,
 * filters, counts and behaves as `completed` / `EXPIRED` with `completedAt = expiredAt`; nothing has to store it.
 *
 * The active cap (§4.1: enabled, unexpired workflows per owner). A record carries `holdsSlot`: true while it is
 * counted in the owner's counter `activeWorkflows`. Every write that sets `holdsSlot` changes the counter in the
 * same transaction (create and resume +1 below the cap; pause, the claim that completes it, the failure after
 * consecutive errors and delete −1), so the counter always equals the number of records holding a slot. Expiry is
 * lazy, so an expired record keeps its slot until released: when a create or resume finds the counter at the cap,
 * the owner's expired slot-holders are released first (each by one transaction: `holdsSlot` true → false with the
 * counter −1, conditioned on still holding it, so concurrent releases never double-count) and the write is tried
 * once more. The cap therefore counts exactly the enabled, unexpired workflows whenever it refuses.
 *
 * Expiry in the background (§8.2): a workflow created with `expiredAt` gets an expiry entry beside its record
 * (shared/store/entities/expiry.ts, listed by due time through sparse gsi2, pattern 21). The sweeper's `expireDue` stores the effective
 * status (`completed` / EXPIRED, `completedAt = expiredAt`), frees the slot and removes schedules and watch entry;
 * the entry goes last, so a pass interrupted half-way is finished by the next one. Cancel and the other terminal
 * writes delete the entry too (best effort: a stale one is only deleted by the pass).
 *
 * The stored form (item version 2): what the client wrote (`name`, `trigger`, `nodes`, `edges`, `inputVariables`)
 * is one JSON text attribute, `document`; the attributes that conditions, filters and updates name (status,
 * counts, times, slot) stay attributes. Free-form JSON is therefore stored exactly as sent: DynamoDB refuses
 * empty map keys and maps nested deeper than 32 levels, and its marshaller would treat `__proto__` as a prototype
 * (API.md §18.6), none of which touches a string. Items of version 1 (those members as DynamoDB maps) read back
 * unchanged: `fromItem` decodes both forms, and every read of a workflow item goes through it.
 *
 * This module is the facade: callers import `* as Workflow` from here; the code sits beside it by concern.
 * ./stored.ts the record (stored form, effective status, the Workflow object, reads); ./create.ts create;
 * ./list.ts list and count; ./slots.ts the active cap and the writes that complete a workflow; ./lifecycle.ts pause,
 * resume, cancel and the expiry pass; ./claim.ts the claim, ./claim-journal.ts this process's claim journal,
 * ./record-cache.ts the records the trigger claims on; ./claim-recovery.ts the claims' recovery by the sweeper;
 * ./outcome.ts consecutive errors.
 */
export type { WorkflowRecord } from "./record";
export { effectiveStatus, getOwned, getForRun } from "./stored";
export { create } from "./create";
export { list, count } from "./list";
export { pause, resume, remove, expireDue } from "./lifecycle";
export {
  DuplicateFire,
  CLAIM_RECOVERY_AFTER_MS,
  INLINE_CLAIM_INPUT_BYTES,
  claimStats,
  SimulatedCrash,
  claim,
  type KeptRunInput,
} from "./claim";
export { recoverClaims, recoverRunClaim, type RunClaimBuilder } from "./claim-recovery";
export { closeJournals } from "./claim-journal";
export { ownedForTrigger } from "./record-cache";
export { recordOutcome, errorMark, outcomeHint } from "./outcome";
