/**
 * The workflow record as stored and read (./workflow.ts, module header): constants and helpers the other workflow
 * modules share, the effective status (§8.2) and the §8.1 Workflow object, the stored form (item version 3 and its
 * definition item; versions 1 and 2 still read), reads.
 */
import { useOwner } from "../context";
import { ApiError, notFound } from "../errors";
import { readDefinitions, readWorkflowItem } from "../store/entities/workflow";
import { checksumAddress } from "../address";
import type { Workflow } from "./schemas";
import type { CompletionReason, StoredStatus, WorkflowRecord } from "./record";
import { useRuntime } from "../current-runtime";

export const ACTIVE_WORKFLOWS = "activeWorkflows";
export const MAX_ATTEMPTS = 60;
export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** The Workflow object of API.md §8.1, as answered. */
export type WorkflowInfo = Workflow;
export type ListStatus = StoredStatus | "running";

export type Item = Record<string, unknown>;

/** A record as read back: its item's other attributes (the claims' markers and kept run inputs) beside it. */
export type StoredWorkflow = WorkflowRecord & Item;
export const workflowNotFound = () => notFound("WORKFLOW_NOT_FOUND", "The workflow");
export const terminal = () =>
  new ApiError(409, "WORKFLOW_TERMINAL", "The workflow is completed or failed; its status can no longer change.");
export const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * 5 * Math.min(attempt, 10)));

/** An id in any letter case upper-cased, or undefined when it cannot be a workflow id (then: as unknown). */
export const normaliseId = (id: string): string | undefined => (ULID_PATTERN.test(id.toUpperCase()) ? id.toUpperCase() : undefined);
export const sameOwner = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
// ---------------------------------------------------------------------------------------------------------
// Effective status and the Workflow object

export const isExpired = (r: Pick<WorkflowRecord, "status" | "expiredAt">, now: number) =>
  (r.status === "enabled" || r.status === "disabled") && r.expiredAt !== undefined && r.expiredAt <= now;

/** §8.2: the status every read and operation sees. */
export function effectiveStatus(
  r: WorkflowRecord,
  now: number,
): { status: StoredStatus; completionReason?: CompletionReason; completedAt?: number } {
  if (isExpired(r, now)) return { status: "completed", completionReason: "EXPIRED", completedAt: r.expiredAt };
  if (r.status === "completed" || r.status === "failed")
    return { status: r.status, completionReason: r.completionReason, completedAt: r.completedAt };
  return { status: r.status };
}

/** The §8.1 Workflow object of a record at `now`. */
export function toInfo(r: WorkflowRecord, now: number): WorkflowInfo {
  const e = effectiveStatus(r, now);
  return {
    id: r.id,
    ...(r.name !== undefined ? { name: r.name } : {}),
    owner: checksumAddress(r.owner),
    smartWalletAddress: checksumAddress(r.smartWalletAddress),
    chainId: r.chainId,
    trigger: r.trigger,
    nodes: r.nodes,
    edges: r.edges,
    inputVariables: r.inputVariables,
    status: e.status,
    ...(r.startAt !== undefined ? { startAt: r.startAt } : {}),
    ...(r.expiredAt !== undefined ? { expiredAt: r.expiredAt } : {}),
    maxExecution: r.maxExecution,
    executionCount: r.executionCount,
    remainingExecutions: Math.max(0, r.maxExecution - r.executionCount),
    ...(e.completionReason !== undefined ? { completionReason: e.completionReason } : {}),
    ...(r.lastRanAt !== undefined ? { lastRanAt: r.lastRanAt } : {}),
    createdAt: r.createdAt,
    ...(e.completedAt !== undefined ? { completedAt: e.completedAt } : {}),
  };
}

/**
 * Why a workflow is not runnable at `now` (§8.8.7 order: the completion reason of a completed workflow, FAILED,
 * DISABLED, NOT_STARTED), or undefined when it is runnable.
 */
export function notRunnableReason(r: WorkflowRecord, now: number): string | undefined {
  const e = effectiveStatus(r, now);
  if (e.status === "completed") return e.completionReason ?? "MAX_EXECUTIONS_REACHED";
  if (r.executionCount >= r.maxExecution) return "MAX_EXECUTIONS_REACHED";
  if (e.status === "failed") return "FAILED";
  if (e.status === "disabled") return "DISABLED";
  if (r.startAt !== undefined && now < r.startAt) return "NOT_STARTED";
  return undefined;
}

export const notRunnable = (reason: string) => new ApiError(412, "WORKFLOW_NOT_RUNNABLE", "The workflow cannot run now.", { reason });

// ---------------------------------------------------------------------------------------------------------
// The stored form

/** Members of the record stored together as the JSON text `document` (./workflow.ts, module header). */
const DOCUMENT_MEMBERS = ["name", "trigger", "nodes", "edges", "inputVariables"] as const;
type DocumentMember = (typeof DOCUMENT_MEMBERS)[number];

/**
 * The stored form of a record: the record item's attributes (besides keys, `type` and `v`) and the client's
 * document as one JSON text, written in an item of its own (the definition, store pattern 10b).
 */
export function toItem(record: WorkflowRecord): { attributes: Item; document: string } {
  const attributes: Item = {};
  const document: Item = {};
  for (const [member, value] of Object.entries(record)) {
    if (value === undefined) continue;
    if ((DOCUMENT_MEMBERS as readonly string[]).includes(member)) document[member] = value;
    else attributes[member] = value;
  }
  return { attributes, document: JSON.stringify(document) };
}

/** The document of a record as its definition item stores it (the record read back whole). */
export const documentOf = (record: WorkflowRecord): string => toItem(record).document;

/**
 * The record of a stored workflow item of any version: version 3 keeps its document in the definition item
 * (`document` given here), version 2 as the attribute `document` (JSON text), version 1 (written before it) the same
 * members as DynamoDB maps and lists, which are taken as they are. Without either document: the record's other
 * members only (a claim's refusal, a count update's answer).
 */
export function fromItem(item: Item, definition?: string): StoredWorkflow {
  const { document = definition, ...attributes } = item;
  if (typeof document !== "string") return item as StoredWorkflow;
  const parsed = JSON.parse(document) as Partial<Pick<WorkflowRecord, DocumentMember>>;
  // Spread and JSON.parse define members as data, so keys such as `__proto__` inside the document stay data.
  return { ...attributes, ...parsed } as StoredWorkflow;
}

// ---------------------------------------------------------------------------------------------------------
// Reading

/** Definitions this process has read (immutable: never stale), at most about this many bytes of JSON. */
const MAX_DEFINITION_BYTES = 32 * 1024 * 1024;
const definitions = new Map<string, string>();
let definitionBytes = 0;

function rememberDefinition(id: string, document: string): void {
  if (definitions.has(id) || document.length > MAX_DEFINITION_BYTES / 8) return;
  definitions.set(id, document);
  definitionBytes += document.length;
  for (const [oldest, text] of definitions) {
    if (definitionBytes <= MAX_DEFINITION_BYTES) break;
    definitions.delete(oldest);
    definitionBytes -= text.length;
  }
}

/** Whether this process has read the definition item of workflow `id` (so it exists, and never changes). */
export const knownDefinition = (id: string): boolean => definitions.has(id);

/**
 * The definitions of `ids` by id, from this process's memory or read (one BatchGetItem per 100 missing); a
 * workflow stored before definitions had items of their own has none.
 */
async function definitionsOf(ids: readonly string[]): Promise<Map<string, string>> {
  const missing = ids.filter((id) => !definitions.has(id));
  if (missing.length > 0) for (const [id, document] of await readDefinitions(missing)) rememberDefinition(id, document);
  return new Map(ids.flatMap((id) => (definitions.has(id) ? [[id, definitions.get(id)!] as const] : [])));
}

/**
 * The documents of the workflows `ids` by id: their definitions, or for a workflow stored before definitions had
 * items of their own (item v 1-2, which leaves one when deleted) the document inside its record.
 */
export async function documentsOf(ids: readonly string[]): Promise<Map<string, string>> {
  const found = await definitionsOf(ids);
  const older = ids.filter((id) => !found.has(id));
  await Promise.all(
    older.map(async (id) => {
      const item = await readWorkflowItem(id);
      if (item && (typeof item.document === "string" || item.trigger !== undefined)) found.set(id, documentOf(fromItem(item)));
    }),
  );
  return found;
}

/** Records of workflow items (a list's page, an update's answer), their definitions read when not inside. */
export async function fromItems(items: readonly Item[]): Promise<StoredWorkflow[]> {
  const outside = items.filter((item) => typeof item.document !== "string" && item.trigger === undefined).map((item) => String(item.id));
  const found = outside.length > 0 ? await definitionsOf(outside) : new Map<string, string>();
  return items.map((item) => fromItem(item, found.get(String(item.id))));
}

export async function read(id: string): Promise<StoredWorkflow | undefined> {
  // The record and (unless remembered) its definition in parallel: a v 2 item's second read finds nothing.
  const [item, found] = await Promise.all([readWorkflowItem(id), definitionsOf([id])]);
  return item ? fromItem(item, found.get(id)) : undefined;
}

/** The caller's workflow record, or 404 WORKFLOW_NOT_FOUND (unknown, malformed, deleted or another owner's alike). */
export async function requireOwned(rawId: string): Promise<WorkflowRecord> {
  const owner = useOwner();
  const id = normaliseId(rawId);
  const record = id ? await read(id) : undefined;
  if (!record || !sameOwner(record.owner, owner)) throw workflowNotFound();
  return record;
}

/** GET /workflows/{id}: the caller's workflow (§8.8.4). */
export async function getOwned(id: string): Promise<WorkflowInfo> {
  const record = await requireOwned(id);
  return toInfo(record, useRuntime().now());
}

/** The record for a run, whoever asks (runner, scheduler, watcher); undefined once deleted. */
export async function getForRun(id: string): Promise<WorkflowRecord | undefined> {
  const normalised = normaliseId(id);
  return normalised ? read(normalised) : undefined;
}
