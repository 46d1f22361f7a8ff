/**
 * Reading an execution's record: the owner's reads, bounded to `max_execution_record_bytes` (API.md §18.2);
 * execution.ts describes the storage.
 */
import { useOwner } from "../context";
import { notFound } from "../errors";
import { getExecution } from "../store/entities/execution";
import { readOutputParts, stepPartPages, type StepPart } from "../store/entities/execution-parts";
import { log } from "../log";
import { fitEscaped, fitRecord } from "./execution-bounds";
import { answerBytes, answersInLambdaEnvelope, LAMBDA_BODY_BUDGET } from "../http/answer-bytes";
import { waitingForOf } from "./waiting-for";
import { lower, type ReadStep, type StoredExecution, type StoredStep } from "./execution-stored";
import type { Execution, StatusSummary } from "./schemas";
import { useRuntime } from "../current-runtime";
import type { Step } from "../engine/schemas";
import { documentsOf } from "../workflow/stored";

// ---------------------------------------------------------------------------------------------------------
// Reading the record

export interface ExecutionRecord {
  owner: string;
  execution: Execution;
}

/**
 * The execution with its steps, whoever owns it (the caller checks), at most `max_execution_record_bytes`
 * serialized (API.md §18.2): 1 GetItem + 1 Query of the steps in parallel, then 1 BatchGetItem of the large
 * outputs the answer keeps, if any.
 */
export async function getRecord(workflowId: string, id: string): Promise<ExecutionRecord | undefined> {
  const [stored, steps] = await Promise.all([getExecution({ workflowId, id }), readSteps(id)]);
  const item = stored as StoredExecution | undefined;
  return item ? { owner: item.owner, execution: (await assemble(item, steps)).execution } : undefined;
}

/** The status summary and owner by one strongly consistent GetItem (the item stays a few KB: waits included). */
export async function readSummary(workflowId: string, id: string): Promise<{ owner: string; summary: StatusSummary } | undefined> {
  const item = (await getExecution({ workflowId, id })) as StoredExecution | undefined;
  return item ? { owner: item.owner, summary: toSummary(item) } : undefined;
}

/** Path ids are ULIDs in any letter case; anything else names no execution. */
const normalizeId = (id: string) => {
  const upper = id.toUpperCase();
  return /^[0-9A-HJKMNP-TV-Z]{26}$/.test(upper) ? upper : undefined;
};

/** GET /executions/{id}: the caller's execution in that workflow, or 404 EXECUTION_NOT_FOUND. */
export async function retrieve(workflowId: string, rawId: string): Promise<Execution> {
  const id = normalizeId(rawId);
  const found = id ? await getRecord(workflowId, id) : undefined;
  if (!found || lower(found.owner) !== lower(useOwner())) throw executionNotFound();
  return found.execution;
}

/** GET /executions/{id}:getStatus and the stream's first read. */
export async function statusOf(workflowId: string, rawId: string): Promise<StatusSummary> {
  const id = normalizeId(rawId);
  const found = id ? await readSummary(workflowId, id) : undefined;
  if (!found || lower(found.owner) !== lower(useOwner())) throw executionNotFound();
  return found.summary;
}

const executionNotFound = () => notFound("EXECUTION_NOT_FOUND", "The execution");

/**
 * Every recorded step of an execution, its parts joined: one Query page per MB of steps. Outputs above
 * INLINE_OUTPUT_BYTES are not read here (`readOutputs` reads those an answer keeps).
 */
export async function readSteps(id: string): Promise<ReadStep[]> {
  const parts = new Map<string, { first?: StepPart; chunks: Uint8Array[] }>();
  for await (const page of stepPartPages(id)) {
    for (const item of page) {
      const entry = parts.get(item.stepId) ?? { chunks: [] };
      if (item.part === 0) entry.first = item;
      entry.chunks[item.part] = item.body;
      parts.set(item.stepId, entry);
    }
  }
  const steps: ReadStep[] = [];
  for (const { first, chunks: all } of parts.values()) {
    // Parts beyond the count of part 0 are leftovers of an earlier, longer recording of the same step.
    const chunks = all.slice(0, first?.parts ?? 0);
    if (!first || chunks.length !== first.parts || chunks.some((c) => c === undefined)) continue;
    const stored = JSON.parse(Buffer.concat(chunks).toString("utf8")) as StoredStep;
    steps.push({
      ...stored,
      // Step items v 1 hold the output in the step.
      outputBytes: first.outputBytes ?? Buffer.byteLength(JSON.stringify(stored.step.output)),
      outputParts: first.outputParts ?? 0,
    });
  }
  return withConfigs(steps);
}

/**
 * The steps with the configs they name in their workflow's definition put back in place (`configIn`: steps
 * recorded by ./execution-write.ts `stepRecording` with a workflow id; one read per workflow this process has not
 * read the definition of).
 */
async function withConfigs(steps: ReadStep[]): Promise<ReadStep[]> {
  const ids = [...new Set(steps.flatMap((s) => (s.configIn !== undefined ? [s.configIn] : [])))];
  if (ids.length === 0) return steps;
  const documents = await documentsOf(ids);
  return steps.map(({ configIn, ...s }) => {
    if (configIn === undefined) return s;
    const config = configOf(documents.get(configIn), s.step.id);
    if (config !== undefined) return { ...s, step: { ...s.step, config } };
    const { config: _none, ...step } = s.step;
    return { ...s, step };
  });
}

/** The config of the trigger or node `id` in a workflow's document (JSON text), if any. */
function configOf(document: string | undefined, id: string): Record<string, unknown> | undefined {
  if (document === undefined) return undefined;
  const { trigger, nodes } = JSON.parse(document) as { trigger?: StepSource; nodes?: StepSource[] };
  const source = trigger?.id === id ? trigger : nodes?.find((n) => n.id === id);
  return source?.config;
}

type StepSource = { id: string; config?: Record<string, unknown> };

/** The recorded steps of `stepIds` (those recorded), their outputs whole as recorded (up to 256 KiB each). */
export async function recordedSteps(id: string, stepIds: readonly string[]): Promise<Step[]> {
  const wanted = new Set(stepIds);
  const steps = (await readSteps(id)).filter((s) => wanted.has(s.step.id));
  const apart = steps.filter((s) => s.outputParts > 0);
  if (apart.length) await readOutputs(id, apart);
  return steps.map((s) => s.step);
}

/** The recorded outputs of `wanted` (steps whose output lies in its own items), into their steps. */
async function readOutputs(id: string, wanted: ReadStep[]): Promise<void> {
  const chunks = new Map<string, Uint8Array[]>();
  const items = await readOutputParts(
    id,
    wanted.map((s) => ({ stepId: s.step.id, parts: s.outputParts })),
  );
  for (const item of items) {
    const entry = chunks.get(item.stepId) ?? [];
    entry[item.part] = item.body;
    chunks.set(item.stepId, entry);
  }
  for (const s of wanted) {
    const parts = chunks.get(s.step.id)?.slice(0, s.outputParts) ?? [];
    const whole = parts.length === s.outputParts && !parts.some((c) => c === undefined);
    // Written in the step's own transaction, so always there; a record never answers with a hole.
    s.step.output = whole ? (JSON.parse(Buffer.concat(parts).toString("utf8")) as Step["output"]) : { data: null };
  }
}

function toSummary(item: StoredExecution): StatusSummary {
  const waitingFor = waitingForOf(item);
  return {
    id: item.id,
    workflowId: item.workflowId,
    status: item.status,
    startAt: item.startAt,
    ...(item.endAt !== undefined ? { endAt: item.endAt } : {}),
    ...(item.error !== undefined ? { error: item.error } : {}),
    ...(waitingFor ? { waitingFor } : {}),
  };
}

/** The steps in API order: trigger step first, then by startAt, node position, then recording order (API.md §10.1). */
function orderSteps(item: StoredExecution, recorded: ReadStep[]): ReadStep[] {
  const byId = new Map<string, ReadStep>();
  if (item.triggerStep) {
    const step = JSON.parse(item.triggerStep) as Step;
    byId.set(item.triggerId, {
      position: -1,
      recordedAt: item.startAt,
      step,
      outputBytes: Buffer.byteLength(JSON.stringify(step.output)),
      outputParts: 0,
    });
  }
  for (const s of recorded) byId.set(s.step.id, s);
  const rank = (s: StoredStep) => (s.step.id === item.triggerId ? 0 : 1);
  return [...byId.values()].sort(
    (a, b) =>
      rank(a) - rank(b) ||
      a.step.startAt - b.step.startAt ||
      (a.position ?? Number.MAX_SAFE_INTEGER) - (b.position ?? Number.MAX_SAFE_INTEGER) ||
      a.recordedAt - b.recordedAt,
  );
}

/** The API shape of the execution item around `steps` (in API order). */
function toExecution(item: StoredExecution, steps: Step[]): Execution {
  const order = new Map(steps.map((s, i) => [s.id, i]));
  const waitingFor = waitingForOf(item);
  const cogs = Object.values(item.cogs ?? {}).sort(
    (a, b) => (order.get(a.nodeId) ?? steps.length) - (order.get(b.nodeId) ?? steps.length) || (a.nodeId < b.nodeId ? -1 : 1),
  );
  return {
    id: item.id,
    workflowId: item.workflowId,
    chainId: item.chainId,
    index: item.index,
    startAt: item.startAt,
    ...(item.endAt !== undefined ? { endAt: item.endAt } : {}),
    status: item.status,
    ...(item.error !== undefined ? { error: item.error } : {}),
    ...(waitingFor ? { waitingFor } : {}),
    steps,
    executionFee: item.executionFee,
    cogs,
    valueFee: item.valueFee,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Bounds of an answer (API.md §18.2)

export interface Assembled {
  execution: Execution;
  /** Its serialized size as this host answers it (escaped once more on Lambda: shared/http/answer-bytes.ts). */
  bytes: number;
}

/**
 * The execution item and its recorded steps as one Execution of at most `max_execution_record_bytes`
 * serialized: the outputs it replaces are never read, the others that lie in their own items are read then.
 * Only the steps the item lists (`stepIds`) are its: a run's last step is written before the update that lists
 * it, and stays unlisted when that update is refused (shared/store/entities/execution.ts `finishExecution`).
 */
export async function assemble(item: StoredExecution, recorded: ReadStep[]): Promise<Assembled> {
  const max = useRuntime().config.limits.maxExecutionRecordBytes;
  const listed = item.stepIds ?? new Set<string>();
  const ordered = orderSteps(
    item,
    recorded.filter((s) => listed.has(s.step.id)),
  );
  const execution = toExecution(
    item,
    ordered.map((s) => s.step),
  );
  const pending = fitRecord(
    execution,
    ordered.map((s) => ({ bytes: s.outputBytes, held: s.outputParts === 0 })),
    max,
  );
  if (pending.length > 0)
    await readOutputs(
      item.id,
      pending.map((i) => ordered[i]!),
    );
  let json = JSON.stringify(execution);
  const raw = Buffer.byteLength(json);
  if (raw > max) log.warn("execution answer above max_execution_record_bytes", { executionId: item.id, bytes: raw, max });
  // On Lambda the envelope escapes the body again: a record of quote-heavy outputs may need more replaced.
  const escaped = answerBytes(json);
  if (answersInLambdaEnvelope() && escaped > LAMBDA_BODY_BUDGET) {
    fitEscaped(execution, raw, escaped, LAMBDA_BODY_BUDGET);
    json = JSON.stringify(execution);
  }
  return { execution, bytes: answerBytes(json) };
}
