/**
 * Open waits of `await` nodes (API.md §17.1): how a wait begins and ends, the run's state between passes, and the
 * hand-over that resumes a run.
 *
 * A wait is the attribute `wait:<nodeId>` of the execution item (shared/store/entities/execution.ts). It ends in
 * exactly one way, by one conditional transaction that removes it and records the waiting node's step: a signal
 * (approve or reject) or a chain event before its deadline, or its deadline at or after it (./wait-kinds.ts: one
 * handler per kind of wait says how each is stored and ends). Concurrent signals,
 * a signal racing the deadline or a log racing a signal thus record one outcome.
 *
 * A run that has nothing left to run while waits are open suspends: its engine state (./runner.ts, `quiet`) is
 * sealed under the key service (outputs may hold secret values) and written in parts, and the execution becomes
 * `waiting` by a conditional update that holds only while every wait the run knows of is still open. A wait that
 * ended meanwhile makes the update fail and the run takes the ended wait up itself, after sealing its state as a
 * checkpoint (a crash before its next step is then recovered from there: ./recovery.ts). Whoever ends a wait of a
 * `waiting` execution hands it to a runner (`handOverResume`); the runner's resume is conditional on the state
 * generation, so two waits ending at once start one driver. A waiting run holds no process, connection or Lambda.
 */
import { createHash } from "node:crypto";
import { log } from "../log";
import { open as openSealed, seal } from "../envelope/envelope";
import { when } from "../store/expression";
import {
  END_PREFIX,
  endOpenWait,
  getExecution,
  openWaitsOf,
  putOpenWait,
  suspendRun,
  checkpointRun,
  waitingDue,
  type ExecutionId,
} from "../store/entities/execution";
import { deleteStateParts, readStateParts, writeStateParts } from "../store/entities/execution-parts";
import type { Suspension } from "../kinds/kind";
import type { EndedWait, RunSnapshot, WaitHost } from "../engine/types";
import { requireBus } from "./bus/install";
import { emitChange } from "./execution-stored";
import { recordedSteps } from "./execution-read";
import { stepRecording } from "./execution-write";
import { storedWait, waitKindOf, type StoredWait, type WaitingNode } from "./wait-kinds";
import { useRuntime } from "../current-runtime";
import type { Step } from "../engine/schemas";

type Item = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------------------
// Beginning and ending

type NodeInfo = Omit<WaitingNode, "id">;

/** Records a wait that began; false when the execution is no longer pending (nothing recorded). */
async function beginWait(
  execution: ExecutionId & { owner: string },
  node: WaitingNode,
  wait: Suspension,
  inputs: string[],
): Promise<boolean> {
  const kind = waitKindOf(wait);
  const common = {
    name: node.name,
    position: node.position,
    since: wait.since,
    deadline: wait.deadline,
    config: JSON.stringify(node.config),
    inputs,
  };
  const stored: StoredWait = kind.stored(wait, node, common);
  await kind.opening?.(execution, node, wait);
  const begun = await putOpenWait(execution, node.id, stored);
  if (begun) emitChange(execution.workflowId, execution.id);
  return begun;
}

/** How a wait ends. */
export type WaitEnd =
  | { how: "signal"; decision: "approve" | "reject"; payload: unknown; signer: string }
  | { how: "event"; output: Record<string, unknown> }
  | { how: "timeout" };

/** What an ended signal wait keeps for replays and approver checks (§17.1.4). */
export interface StoredEnd {
  decision: "approve" | "reject";
  signer: string;
  payloadHash: string;
  at: number;
  approvers: string[];
}

export const payloadHash = (payload: unknown) =>
  createHash("sha256")
    .update(JSON.stringify(payload ?? null))
    .digest("hex");

/** The ended signal wait of `nodeId` on an item, if any. */
export const storedEnd = (item: Item, nodeId: string) => item[`${END_PREFIX}${nodeId}`] as StoredEnd | undefined;

/**
 * Ends the wait of `nodeId` as `end` says, recording the await node's step, if it is still open and the end is
 * in time (a signal or an event before the deadline, a timeout at or after it). `read`: the execution item as the
 * caller has just read it. Answers the item's status when it ended it (the caller hands a `waiting` one over), or
 * undefined when the wait was not open for that end.
 */
export async function endWait(
  execution: ExecutionId,
  nodeId: string,
  end: WaitEnd,
  read?: Item,
): Promise<"pending" | "waiting" | undefined> {
  let item = read;
  for (let attempt = 0; attempt < 5; attempt++) {
    item ??= await getExecution(execution);
    const status = item?.status;
    const wait = item ? storedWait(openWaitsOf(item).get(nodeId)) : undefined;
    if (!wait || (status !== "pending" && status !== "waiting")) return undefined;
    if (end.how !== "timeout" && waitKindOf(wait).endedBy !== end.how) return undefined;
    const now = useRuntime().now();
    const deadlinePath = [`wait:${nodeId}`, "deadline"];
    const timely = end.how === "timeout" ? now >= wait.deadline : now < wait.deadline;
    if (!timely) return undefined;
    const step = stepOf(nodeId, wait, end, now);
    // A small outcome rides on the execution item too, so the resume reads it with the item instead of a Query.
    const small = Buffer.byteLength(JSON.stringify(step.output)) <= RESULT_ON_ITEM_BYTES;
    const stored: Partial<StoredEnd> & { result?: EndedWait } = {
      ...(end.how === "signal" && wait.kind === "signal"
        ? { decision: end.decision, signer: end.signer, payloadHash: payloadHash(end.payload), at: now, approvers: wait.approvers ?? [] }
        : {}),
      ...(small ? { result: { nodeId, success: step.success, output: step.output, startAt: step.startAt } } : {}),
    };
    const ended = await endOpenWait(execution, nodeId, {
      status,
      guard: end.how === "timeout" ? when.le(deadlinePath, now) : when.gt(deadlinePath, now),
      ...(Object.keys(stored).length ? { end: stored } : {}),
      attentionAt: now,
      recording: stepRecording(step, wait.position),
    });
    if (ended) {
      emitChange(execution.workflowId, execution.id);
      return status;
    }
    item = undefined; // the status moved, or another end won: read again
  }
  return undefined;
}

function stepOf(nodeId: string, wait: StoredWait, end: WaitEnd, at: number): Step {
  const kind = waitKindOf(wait);
  const base = {
    id: nodeId,
    type: kind.stepType(wait),
    name: wait.name,
    inputs: wait.inputs,
    config: JSON.parse(wait.config) as Record<string, unknown>,
    startAt: wait.since,
    endAt: at,
  };
  switch (end.how) {
    case "signal": {
      const data = { decision: end.decision, payload: end.payload ?? null, signer: end.signer, at };
      return end.decision === "approve"
        ? { ...base, success: true, output: { data } }
        : { ...base, success: false, error: `rejected by ${end.signer}`, errorCode: "REJECTED", output: { data } };
    }
    case "event":
      return { ...base, success: true, output: end.output };
    case "timeout":
      return { ...base, ...kind.expired(wait) };
  }
}

/**
 * Ends the chain-event wait of `nodeId` with the output an event trigger would carry for the matching log
 * (`{data: {address, blockNumber, …}}`), and hands a waiting run over; false when the wait is no longer open
 * (ended, timed out, execution gone).
 */
export async function endWaitByEvent(
  workflowId: string,
  executionId: string,
  nodeId: string,
  output: Record<string, unknown>,
): Promise<boolean> {
  const execution = { workflowId, id: executionId };
  const item = await getExecution(execution);
  const wait = item ? storedWait(openWaitsOf(item).get(nodeId)) : undefined;
  if (!item || wait?.kind !== "chainEvent") return false;
  const status = await endWait(execution, nodeId, { how: "event", output }, item);
  if (status === "waiting") await handOverResume(execution, item);
  return status !== undefined;
}

/**
 * Asks a runner to resume a waiting execution (the bus's `execution.requested` with `resume`). A lost hand-over is
 * found by the sweeper (`endDueWaits`): the end put the execution on the waiting index at once.
 */
export async function handOverResume(execution: ExecutionId, item: Item): Promise<void> {
  const from = { generation: Number(item.stateGeneration), pendingMs: Number(item.pendingMs ?? 0) };
  try {
    await requireBus().publish({
      type: "execution.requested",
      workflowId: execution.workflowId,
      executionId: execution.id,
      owner: String(item.owner),
      resume: true,
      ...(Number.isInteger(from.generation) ? { from } : {}),
    });
  } catch (err) {
    log.warn("could not hand a waiting run over for resuming; the sweeper will", {
      executionId: execution.id,
      error: (err as Error).message,
    });
  }
}

/**
 * The sweeper's pass over waiting executions (pattern 26): waits past their deadline end AWAIT_TIMEOUT (at most a
 * sweep interval late), and every execution with a wait ended since it suspended is handed to a runner. Returns
 * how many were handed over.
 */
export async function endDueWaits(now = useRuntime().now(), max = 100): Promise<number> {
  let handed = 0;
  for (const execution of await waitingDue(now + 1, max)) {
    let item = await getExecution(execution);
    if (item?.status !== "waiting") continue;
    for (const [nodeId, wait] of openWaitsOf(item)) {
      if ((storedWait(wait)?.deadline ?? Infinity) <= now) await endWait(execution, nodeId, { how: "timeout" });
    }
    item = await getExecution(execution);
    if (item?.status !== "waiting") continue;
    const open = openWaitsOf(item);
    if (((item.openWaits as string[] | undefined) ?? []).some((id) => !open.has(id))) {
      await handOverResume(execution, item);
      handed++;
    }
  }
  return handed;
}

// ---------------------------------------------------------------------------------------------------------
// Suspending and resuming (the runner's side)

/** Bytes of sealed state per item. */
const STATE_PART_BYTES = 350_000;

interface StateKey {
  encryptedKey: string;
  iv: string;
  tag: string;
  keyId: string;
}

const stateContext = (executionId: string) => ({ executionId, purpose: "run-state" });

/** The state a waiting run left (the item's generation), opened. */
export async function loadState(item: Item): Promise<RunSnapshot> {
  const id = String(item.id);
  const ciphertext = await readStateParts(id, Number(item.stateGeneration), Number(item.stateParts));
  const json = await openSealed({ ...(item.stateKey as StateKey), ciphertext: ciphertext.toString("base64") }, stateContext(id));
  return JSON.parse(json) as RunSnapshot;
}

/** The ended waits among `nodeIds`: their recorded steps. */
export async function endedWaits(item: Item, nodeIds: readonly string[]): Promise<EndedWait[]> {
  const onItem = nodeIds.flatMap((id) => {
    const result = (item[`${END_PREFIX}${id}`] as { result?: EndedWait } | undefined)?.result;
    return result ? [result] : [];
  });
  const rest = nodeIds.filter((id) => !onItem.some((r) => r.nodeId === id));
  if (rest.length === 0) return onItem;
  const steps = await recordedSteps(String(item.id), rest);
  return [...onItem, ...steps.map((s) => ({ nodeId: s.id, success: s.success, output: s.output, startAt: s.startAt }))];
}

/** An ended wait's outcome up to this size (JSON bytes) is kept on the execution item as well as in its step. */
const RESULT_ON_ITEM_BYTES = 4_096;

/** How a pass's state is put in force: suspended (`waiting`), or checkpointed while the run goes on. */
type StateWrite = (fields: SealedState) => Promise<boolean>;
type SealedState = Parameters<typeof suspendRun>[1];

/**
 * Seals `snapshot` as the next generation of the run's state and puts it in force with `write` (conditional on
 * the item's state); the generation that lost (the old one, or the new one when refused) is deleted. Whether
 * `write` landed.
 */
async function persistState(
  key: ExecutionId,
  item: Item,
  snapshot: RunSnapshot,
  fields: Omit<SealedState, "stateGeneration" | "stateParts" | "stateKey">,
  lastDeadline: number,
  write: StateWrite,
): Promise<boolean> {
  const { config } = useRuntime();
  const generation = Number(item.stateGeneration ?? 0) + 1;
  const sealed = await seal(JSON.stringify(snapshot), stateContext(key.id));
  const expiresAt = Math.ceil((lastDeadline + config.limits.executionTimeoutMs) / 1000) + 24 * 3600;
  const parts = await writeStateParts(key.id, generation, Buffer.from(sealed.ciphertext, "base64"), STATE_PART_BYTES, expiresAt);
  const stateKey = { encryptedKey: sealed.encryptedKey, iv: sealed.iv, tag: sealed.tag, keyId: sealed.keyId };
  const landed = await write({ ...fields, stateGeneration: generation, stateParts: parts, stateKey });
  const stale = landed ? Number(item.stateGeneration ?? 0) : generation;
  const staleParts = landed ? Number(item.stateParts ?? 0) : parts;
  if (stale > 0 && staleParts > 0)
    await deleteStateParts(key.id, stale, staleParts).catch((err: unknown) =>
      log.warn("could not delete a waiting run's old state (it expires)", { executionId: key.id, error: (err as Error).message }),
    );
  return landed;
}

/**
 * The runner's host for one pass's waits (the engine's WaitHost): records waits as they begin; when nothing runs,
 * ends the waits past their deadline, hands back those that ended, or suspends the run. Waits that ended while the
 * run was pending are handed back after a checkpoint of the state (./recovery.ts): a crash before the run's next
 * step then loses nothing.
 */
export function waitHost(
  execution: ExecutionId & { owner: string },
  nodes: ReadonlyMap<string, NodeInfo>,
  pass: { startedAt: number; pendingMsBefore: number },
): WaitHost {
  const key = { workflowId: execution.workflowId, id: execution.id };
  return {
    async begin(nodeId, wait, inputs) {
      await beginWait(execution, { id: nodeId, ...nodes.get(nodeId)! }, wait, inputs);
    },
    async quiet(snapshot) {
      const { now } = useRuntime();
      for (let attempt = 0; attempt < 20; attempt++) {
        const item = await getExecution(key);
        if (item?.status !== "pending") return { stopped: "execution stopped" };
        const waits = openWaitsOf(item);
        const deadlineOf = (id: string) => storedWait(waits.get(id))?.deadline;
        const due = snapshot.open.filter((id) => (deadlineOf(id) ?? Infinity) <= now());
        if (due.length) {
          for (const id of due) await endWait(key, id, { how: "timeout" });
          continue;
        }
        const ended = snapshot.open.filter((id) => !waits.has(id));
        const deadlines = snapshot.open.flatMap((id) => deadlineOf(id) ?? []);
        const lastDeadline = Math.max(now(), ...deadlines);
        const steps = ((item.stepIds as Set<string> | undefined)?.size ?? 0) - ended.length;
        const pendingMs = pass.pendingMsBefore + Math.max(0, now() - pass.startedAt);
        if (ended.length) {
          const fields = { pendingMs: pass.pendingMsBefore, open: snapshot.open, attentionAt: now(), steps };
          const checkpoint: StateWrite = (f) => checkpointRun(key, { ...f, passStartedAt: pass.startedAt, driverAt: now() });
          if (!(await persistState(key, item, snapshot, fields, lastDeadline, checkpoint))) continue;
          return { ended: await endedWaits(item, ended) };
        }
        const fields = { pendingMs, open: snapshot.open, attentionAt: Math.min(...deadlines), steps };
        if (await persistState(key, item, snapshot, fields, lastDeadline, (f) => suspendRun(key, f))) {
          emitChange(key.workflowId, key.id);
          return { suspended: true };
        }
      }
      throw new Error(`execution ${key.id} could not be suspended: its waits kept changing`);
    },
  };
}
