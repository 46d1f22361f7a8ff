/**
 * Key builders, one per entity. Handlers never concatenate key strings themselves.
 * Owners are stored as lower-case addresses in keys so that case never splits a partition.
 */
const lower = (address: string) => address.toLowerCase();

/**
 * Shards of each sparse "due" index partition (README "Sharded due keys"): an item lands on `<partition>#<n>`, `n`
 * from a hash of its id, so that no one partition takes a whole stage's writes (DynamoDB serves about 1,000
 * writes/s per partition); readers query every shard (`Keys.dueShards`).
 */
const DUE_SHARDS = 8;

/** FNV-1a of the id, modulo the shards: the same id always lands on the same shard. */
function shardOf(id: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % DUE_SHARDS;
}

/** The sparse due partitions, each sharded. */
export const DuePartition = {
  pendingExecution: "EXEC#pending",
  waitingExecution: "EXEC#waiting",
  claimJournal: "CLAIM#journal",
  claimInFlight: "CLAIM#inflight",
  expiry: "EXPIRY#due",
  pendingWithdrawal: "WITHDRAWAL#pending",
} as const;
const due = (partition: string, id: string) => `${partition}#${shardOf(id)}`;

export const Keys = {
  /**
   * Every partition of a sharded due partition: its shards, then the partition itself, where items written before
   * the sharding lie (they leave it as they leave the index).
   */
  dueShards: (partition: string) => [...Array.from({ length: DUE_SHARDS }, (_, n) => `${partition}#${n}`), partition],

  owner: (owner: string) => `OWNER#${lower(owner)}`,

  /** Secrets: owner partition, ordered by name, user scope (0) before workflow scope (1), then workflow id. */
  secret: (owner: string, name: string, workflowId?: string) => ({
    pk: Keys.owner(owner),
    sk: workflowId ? `SECRET#${name}#1#${workflowId}` : `SECRET#${name}#0`,
  }),
  secretPrefix: "SECRET#",
  /**
   * GSI1 of a workflow-scoped secret: that workflow's secrets by name. The sort key repeats the main sort key,
   * so one cursor position (the `sk`) orders the filtered and the unfiltered list alike (API.md §3).
   */
  secretByWorkflow: (owner: string, workflowId: string, name: string) => ({
    gsi1pk: `${Keys.owner(owner)}#WF#${workflowId}#SECRETS`,
    gsi1sk: Keys.secret(owner, name, workflowId).sk,
  }),

  /** Workflows: one item per id (the id is a ULID); the item carries `owner` (EIP-55) and `type: "workflow"`. */
  workflow: (id: string) => ({ pk: `WF#${id}`, sk: "WORKFLOW" }),
  /** A workflow's immutable definition (pattern 10b): its document beside the record, kept after a delete. */
  workflowDefinition: (id: string) => ({ pk: `WF#${id}`, sk: "DEFINITION" }),
  /** GSI1 of a workflow (pattern 11): the owner's workflows, newest first. */
  workflowByOwner: (owner: string, id: string) => ({ gsi1pk: `${Keys.owner(owner)}#WF`, gsi1sk: id }),
  /**
   * GSI3 of a workflow (pattern 12, keys only): the owner's workflows of one wallet (list filter, wallet counts).
   * Records written before it lie on GSI2 under the same key values (`legacyWorkflowByWallet`).
   */
  workflowByWallet: (owner: string, wallet: string, id: string) => ({
    gsi3pk: `${Keys.owner(owner)}#WALLET#${lower(wallet)}#WF`,
    gsi3sk: id,
  }),
  legacyWorkflowByWallet: (owner: string, wallet: string, id: string) => ({
    gsi2pk: `${Keys.owner(owner)}#WALLET#${lower(wallet)}#WF`,
    gsi2sk: id,
  }),

  /** Executions (pattern 13): the workflow's executions, newest first by ULID. */
  execution: (workflowId: string, id: string) => ({ pk: `WF#${workflowId}#EXEC`, sk: id }),
  /** The execution an item key names (`Keys.execution`'s inverse: a keys-only index answers keys alone). */
  executionOf: (key: { pk: string; sk: string }) => ({ workflowId: key.pk.slice("WF#".length, -"#EXEC".length), id: key.sk }),
  /** GSI1 of an execution (pattern 14): the owner's executions, newest first (ULIDs sort by startAt). */
  executionByOwner: (owner: string, id: string) => ({ gsi1pk: `${Keys.owner(owner)}#EXEC`, gsi1sk: id }),
  /**
   * GSI3 (keys only) of a pending execution (pattern 15, sparse: removed when terminal): the sweeper reads them
   * oldest first. Items written before gsi3 carry the same keys as `gsi2pk`/`gsi2sk`.
   */
  pendingExecution: (startAt: number, id: string) => ({
    gsi3pk: due(DuePartition.pendingExecution, id),
    gsi3sk: `${String(startAt).padStart(15, "0")}#${id}`,
  }),
  /**
   * GSI3 (keys only) of a waiting execution (pattern 26, sparse: only while `waiting`, API.md §17.1): the sweeper
   * reads those whose attention time (the earliest deadline of their waits, or the moment a wait ended) has come.
   */
  waitingExecution: (at: number, id: string) => ({
    gsi3pk: due(DuePartition.waitingExecution, id),
    gsi3sk: `${String(at).padStart(15, "0")}#${id}`,
  }),
  /** A waiting run's engine state (pattern 13d): sealed JSON in parts, one generation per suspension. */
  executionState: (id: string, generation: number, part: number) => ({
    pk: `EXEC#${id}`,
    sk: `STATE#${String(generation).padStart(6, "0")}#${String(part).padStart(3, "0")}`,
  }),
  /** Recorded steps of an execution (pattern 13b): a step's JSON in parts, each far below DynamoDB's 400 KB item limit. */
  executionStep: (id: string, stepId: string, part: number) => ({
    pk: `EXEC#${id}`,
    sk: `STEP#${stepId}#${String(part).padStart(2, "0")}`,
  }),
  /** A recorded step output above 4 KiB (pattern 13b, step items v 2): its JSON in parts beside the step, read only when the answer keeps it. */
  executionStepOutput: (id: string, stepId: string, part: number) => ({
    pk: `EXEC#${id}`,
    sk: `OUT#${stepId}#${String(part).padStart(2, "0")}`,
  }),
  /** A run's input too large for the execution item (manual data up to 1 MiB), in parts beside its steps (pattern 13c). */
  executionInput: (id: string, part: number) => ({ pk: `EXEC#${id}`, sk: `INPUT#${String(part).padStart(2, "0")}` }),
  /** Fire records (pattern 17): at most one execution per fire id, expiring after the fire can no longer repeat. */
  fire: (fireId: string) => ({ pk: `FIRE#${fireId}`, sk: "FIRE" }),
  /**
   * Claim intent of a manual trigger (pattern 22): written before the claim's count update, deleted once the
   * execution is written. An automatic fire's intent is its fire record (pattern 17), kept after.
   */
  claimIntent: (executionId: string) => ({ pk: `CLAIM#${executionId}`, sk: "CLAIM" }),
  /**
   * Claim journal (pattern 22): the workflows one process (`claimer`) claimed manual executions of during one epoch
   * (a minute, `epoch` its start in ms), written before the first of those claims' count updates and deleted by
   * that process once every one of them wrote its execution; what a crash leaves, the sweeper finds through its
   * gsi2 entry once due.
   */
  claimJournal: (claimer: string, epoch: number) => ({ pk: `CLAIMJOURNAL#${claimer}#${String(epoch).padStart(15, "0")}`, sk: "JOURNAL" }),
  /**
   * GSI3 (keys only) of a claim journal (pattern 22): listed from the instant the sweeper may take it over (`dueAt`),
   * oldest first. Items written before gsi3 carry the same keys as `gsi2pk`/`gsi2sk` (so for every due key below).
   */
  claimJournalDue: (dueAt: number, claimer: string) => ({
    gsi3pk: due(DuePartition.claimJournal, claimer),
    gsi3sk: `${String(dueAt).padStart(15, "0")}#${claimer}`,
  }),
  /** GSI3 of an intent still in flight (pattern 22, sparse): the sweeper finishes the ones left by a crash, oldest first. */
  claimInFlight: (startAt: number, executionId: string) => ({
    gsi3pk: due(DuePartition.claimInFlight, executionId),
    gsi3sk: `${String(startAt).padStart(15, "0")}#${executionId}`,
  }),
  /** Chain checkpoint (pattern 18): the block every caught-up query has reached, the cursors of those behind (`behind`, `floors`), and the watcher's lease. */
  chainCheckpoint: (chainId: number) => ({ pk: `CHAIN#${chainId}`, sk: "CHECKPOINT" }),
  /** Watch entry of a block/event workflow (pattern 19): beside its record, listed per chain through sparse gsi2. */
  watch: (workflowId: string) => ({ pk: `WF#${workflowId}`, sk: "WATCH" }),
  watchByChain: (chainId: number, workflowId: string) => ({ gsi2pk: `CHAIN#${chainId}#WATCH`, gsi2sk: workflowId }),
  /**
   * Await watch entry of a chain-event wait (pattern 19b, API.md §17.1): beside the execution's steps, listed with
   * the chain's watch entries on the same sparse gsi2 partition (its sort key never equals a workflow id).
   */
  awaitWatch: (executionId: string, nodeId: string) => ({ pk: `EXEC#${executionId}`, sk: `AWAIT#${nodeId}` }),
  awaitWatchByChain: (chainId: number, executionId: string, nodeId: string) => ({
    gsi2pk: `CHAIN#${chainId}#WATCH`,
    gsi2sk: `await#${executionId}#${nodeId}`,
  }),
  /** Expiry entry of a workflow with `expiredAt` (pattern 21): beside its record, due ones through sparse gsi3. */
  expiry: (workflowId: string) => ({ pk: `WF#${workflowId}`, sk: "EXPIRY" }),
  expiryDue: (expiredAt: number, workflowId: string) => ({
    gsi3pk: due(DuePartition.expiry, workflowId),
    gsi3sk: `${String(expiredAt).padStart(15, "0")}#${workflowId}`,
  }),

  /** Per-owner counters guarded by conditional updates (secrets, wallets per chain, active workflows). */
  counter: (owner: string, name: string) => ({ pk: Keys.owner(owner), sk: `COUNTER#${name}` }),
  /**
   * Open-stream slots of an owner (API.md §17.5, shared/execution/stream-slots.ts): slot 0 … max − 1, each held by
   * at most one open stream's lease (`streamId`, `leaseUntil` ms) until it is released or expires.
   */
  streamSlot: (owner: string, slot: number) => ({ pk: Keys.owner(owner), sk: `${Keys.streamSlotPrefix}${String(slot).padStart(4, "0")}` }),
  streamSlotPrefix: "STREAMSLOT#",

  /** Wallets: owner partition, one per (chain, address); the address is derived from (owner, factory, salt). */
  wallet: (owner: string, chainId: number, address: string) => ({
    pk: Keys.owner(owner),
    sk: `WALLET#${chainId}#${lower(address)}`,
  }),
  walletPrefix: (chainId: number) => `WALLET#${chainId}#`,

  /** Withdrawals: owner partition, per wallet and chain, newest first by ULID. */
  withdrawal: (owner: string, chainId: number, wallet: string, id: string) => ({
    pk: Keys.owner(owner),
    sk: `${Keys.withdrawalPrefix(chainId, wallet)}${id}`,
  }),
  withdrawalPrefix: (chainId: number, wallet: string) => `WITHDRAWAL#${chainId}#${lower(wallet)}#`,
  /** GSI3 of a pending withdrawal (sparse): the background follow-up reads them oldest first. */
  pendingWithdrawal: (submittedAt: number, id: string) => ({
    gsi3pk: due(DuePartition.pendingWithdrawal, id),
    gsi3sk: `${submittedAt}#${id}`,
  }),

  /**
   * Token metadata cache (API.md §17.4, shared/token/token.ts): one item per (chain, token), shared by every owner
   * (it is public chain data), kept 24 hours when found and 10 minutes when not.
   */
  tokenMetadata: (chainId: number, address: string) => ({ pk: `TOKEN#${chainId}#${lower(address)}`, sk: "METADATA" }),

  /** Idempotency records: one per (owner, scope, key), expiring after idempotency_ttl_s. */
  idempotency: (owner: string, scope: string, key: string) => ({
    pk: `IDEM#${lower(owner)}#${scope}`,
    sk: `KEY#${key}`,
  }),

  /**
   * Rate-limit bucket of one subject (`sub:<owner lower-case>` or `ip:<address>`, see shared/http/rate-limit.ts):
   * its own partition, so a busy subject never heats another's; the item expires once the bucket is full again.
   */
  rateLimit: (subject: string) => ({ pk: `RATE#${subject}`, sk: "RATE" }),

  /**
   * Sponsored gas (API.md §18.5, shared/wallet/sponsorship.ts): one item per budget counter, its hourly buckets of
   * the last 24 hours inside. An owner's counter per chain, and the chain's counter split into shards, each in its
   * own partition so that no owner's and no shard's traffic heats another's.
   */
  sponsoredGasOwner: (chainId: number, owner: string) => ({ pk: `SPONSOR#${chainId}#OWNER#${lower(owner)}`, sk: "GAS" }),
  sponsoredGasChain: (chainId: number, shard: number) => ({ pk: `SPONSOR#${chainId}#SHARD#${shard}`, sk: "GAS" }),
} as const;
