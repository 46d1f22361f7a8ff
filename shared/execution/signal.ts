/**
 * POST /executions/{id}:signal (API.md §17.1.4): the owner, or an approver listed on the await node, approves or
 * rejects an open `signal` wait. Checks in the contract's order: body and query (the route, and `payload` size
 * here), lookup and caller (404, an approver learns nothing else), then state (400 `nodeId`, 409). The wait ends
 * by one conditional transaction (./waits.ts), so concurrent signals and a signal racing the deadline record
 * one outcome; a signal that lost, or any other signal for an ended wait, is 409, except the same decision and
 * payload from the caller who ended it (200, nothing changes). Then the run goes on in a runner (the bus) and the
 * answer waits, at most `blocking_trigger_wait_ms`, for its next terminal or `waiting` status.
 */
import { ApiError, notFound, validationFailed } from "../errors";
import { useOwner } from "../context";
import * as Idempotency from "../store/idempotency";
import { getExecution, openWaitsOf } from "../store/entities/execution";
import { END_PREFIX } from "../store/entities/execution";
import { onChange } from "./execution-stored";
import { getRecord, readSummary } from "./execution-read";
import { endWait, handOverResume, payloadHash, storedEnd, type StoredEnd } from "./waits";
import type { Execution, StatusSummary } from "./schemas";
import { useConfig, useRuntime } from "../current-runtime";
import type { StoredWait } from "./wait-kinds";

/** Signal `payload` at most (§17.5), serialized. */
const MAX_SIGNAL_PAYLOAD_BYTES = 65_536;

export interface SignalBody {
  decision: "approve" | "reject";
  payload?: unknown;
  nodeId?: string;
}

type Item = Record<string, unknown>;

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
const executionNotFound = () => notFound("EXECUTION_NOT_FOUND", "The execution");
const notWaiting = (what: string) => new ApiError(409, "EXECUTION_NOT_WAITING", `The execution is not waiting for ${what}.`);

export async function signal(
  workflowId: string,
  rawId: string,
  body: SignalBody,
  idempotencyKey: string | undefined,
): Promise<{ result: Execution | StatusSummary; replayed: boolean }> {
  const payload = body.payload ?? null;
  if (Buffer.byteLength(JSON.stringify(payload)) > MAX_SIGNAL_PAYLOAD_BYTES)
    throw validationFailed([{ path: "body.payload", message: `must be at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes serialized` }]);

  // The token's subject, EIP-55 as sign-in wrote it (shared/http/token.ts).
  const caller = useOwner();
  const id = /^[0-9A-HJKMNP-TV-Z]{26}$/.test(rawId.toUpperCase()) ? rawId.toUpperCase() : undefined;
  const execution = { workflowId, id: id ?? "" };
  const item = id ? await getExecution(execution) : undefined;
  if (!item) throw executionNotFound();
  const owner = String(item.owner);
  const isOwner = same(owner, caller);
  const waits = openWaitsOf(item) as Map<string, unknown> as Map<string, StoredWait>;
  const signalWaits = [...waits].filter(([, w]) => w.kind === "signal").map(([nodeId]) => nodeId);
  const target = body.nodeId ?? (signalWaits.length === 1 ? signalWaits[0] : undefined);

  // Who: the owner, or an approver of that node (of any await node while the target is not named yet).
  const approversOf = (nodeId: string) => signalApprovers(waits.get(nodeId)) ?? storedEnd(item, nodeId)?.approvers ?? [];
  if (!isOwner) {
    const candidates = target !== undefined ? [target] : [...waits.keys(), ...endedNodes(item)];
    if (!candidates.some((nodeId) => approversOf(nodeId).some((a) => same(a, caller)))) throw executionNotFound();
  }
  if (body.nodeId === undefined && signalWaits.length > 1)
    throw validationFailed([{ path: "body.nodeId", message: "is required when more than one signal wait is open" }]);

  const answer = async (replayed: boolean) => ({ result: await answerFor(execution, isOwner), replayed });
  const key = idempotencyKey ? { owner: caller, scope: `signal#${execution.id}`, key: idempotencyKey } : undefined;
  let leaseUntil = Infinity;
  if (key) {
    // A signal is idempotent by itself (§17.1.4): a repeat of one that crashed signals again, a no-op if it had landed.
    const claim = await Idempotency.claim(key, {
      fingerprint: Idempotency.bodyFingerprint(body),
      operationId: execution.id,
      recover: async () => undefined,
    });
    if (claim.kind === "replay") return answer(true);
    leaseUntil = claim.leaseUntil;
  }
  try {
    const ended = await endSignalWait(execution, item, target, { decision: body.decision, payload, signer: caller });
    if (ended === "waiting") await handOverResume(execution, item);
    if (ended !== "replayed") await goneOn(execution, target!);
  } catch (err) {
    if (key) await Idempotency.release(key, leaseUntil);
    throw err;
  }
  if (key) await Idempotency.complete(key, execution.id, { signalled: true });
  return answer(false);
}

const endedNodes = (item: Item) =>
  Object.keys(item).flatMap((name) => (name.startsWith(END_PREFIX) ? [name.slice(END_PREFIX.length)] : []));

/** The same signal from the caller who ended the wait: a repeat, answered without change. */
function isRepeat(item: Item, nodeId: string | undefined, signal: { decision: string; payload: unknown; signer: string }): boolean {
  const hash = payloadHash(signal.payload);
  const matches = (end: StoredEnd | undefined) =>
    end?.signer !== undefined && same(end.signer, signal.signer) && end.decision === signal.decision && end.payloadHash === hash;
  if (nodeId !== undefined) return matches(storedEnd(item, nodeId));
  return endedNodes(item).some((id) => matches(storedEnd(item, id)));
}

/** Ends the target's wait: the item's status when this signal ended it, or "replayed" for a repeat; else 409. */
async function endSignalWait(
  execution: { workflowId: string; id: string },
  item: Item,
  target: string | undefined,
  signal: { decision: "approve" | "reject"; payload: unknown; signer: string },
): Promise<"pending" | "waiting" | "replayed"> {
  const wait = target !== undefined ? openWaitsOf<StoredWait>(item).get(target) : undefined;
  if (target === undefined || wait?.kind !== "signal" || useRuntime().now() >= wait.deadline) {
    if (isRepeat(item, target, signal)) return "replayed";
    throw notWaiting(target === undefined ? "a signal" : `a signal to ${target}`);
  }
  const status = await endWait(execution, target, { how: "signal", ...signal }, item);
  if (status) return status;
  // Another end won the race (a signal, the deadline): only this caller's own identical signal is a repeat.
  const now = await getExecution(execution);
  if (now && isRepeat(now, target, signal)) return "replayed";
  throw notWaiting(`a signal to ${target}`);
}

/**
 * Waits, at most `blocking_trigger_wait_ms`, until the run has taken the ended wait up: a terminal status, or
 * `waiting` on waits that no longer include it. Woken by this process's changes, else polling.
 */
async function goneOn(execution: { workflowId: string; id: string }, nodeId: string): Promise<void> {
  const deadline = useRuntime().now() + useConfig().limits.blockingTriggerWaitMs;
  let wake: (() => void) | undefined;
  const unsubscribe = onChange(execution.workflowId, execution.id, () => wake?.());
  try {
    for (let pause = 50; useRuntime().now() < deadline; pause = Math.min(pause * 1.5, 500)) {
      const item = await getExecution(execution);
      const status = item?.status;
      if (!item || (status !== "pending" && status !== "waiting")) return;
      if (status === "waiting" && !((item.openWaits as string[] | undefined) ?? []).includes(nodeId)) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(pause, Math.max(0, deadline - useRuntime().now())));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    unsubscribe();
  }
}

/** The owner reads the execution; an approver only its status summary. */
async function answerFor(execution: { workflowId: string; id: string }, isOwner: boolean): Promise<Execution | StatusSummary> {
  if (isOwner) {
    const found = await getRecord(execution.workflowId, execution.id);
    if (!found) throw executionNotFound();
    return found.execution;
  }
  const found = await readSummary(execution.workflowId, execution.id);
  if (!found) throw executionNotFound();
  return found.summary;
}

/** Who may signal a wait besides the owner: a signal wait's approvers (no other kind has any). */
const signalApprovers = (wait: StoredWait | undefined) => (wait?.kind === "signal" ? wait.approvers : undefined);
