/**
 * The manual trigger (API.md §8.8.7): checks the request in the contract's order, claims one execution
 * (Workflow.claim: one conditional count update on the workflow item, the `pending` record written right after),
 * then hands the run to a runner through the bus (asynchronous: 202), or waits for it (blocking: 200): it runs
 * in this process in the owner's turn of the fair run queue when the bus delivers in this process (`npm start`),
 * else (AWS: EventBridge → the runner function) it is handed over like an asynchronous run and the record is
 * read until it ends, so the HTTP function never has a run in flight when it answers and is frozen.
 *
 * Order: body fields (400) → workflow lookup (404) → `triggerType` (400 TRIGGER_TYPE_MISMATCH) → `triggerInput`
 * keys against the workflow's trigger and node names (400) → Idempotency-Key replay or conflict (409/422) →
 * the claim, which decides runnable (412 with `reason`) atomically with `executionCount < maxExecution`. Without
 * an Idempotency-Key the lookup may use the process's cached record of the workflow (Workflow.ownedForTrigger):
 * a warm trigger is then two DynamoDB requests up to its answer, the count update and the execution's put.
 *
 * Idempotency-Key: the key is completed as soon as the execution is claimed, so a repeat during a long blocking
 * run is a replay (the same execution, waited on again), not a 409; a request refused before the claim (412, 404)
 * forgets the key. The execution id is chosen before the key is claimed and recorded on it, so a repeat of a
 * request that crashed finds its claim by that id once the key's lease has passed (the execution, or the marker its
 * count update left, finished as the sweeper would), or claims under the same id: never a second index.
 */
import * as v from "valibot";
import { ulid } from "ulid";
import { useOwner } from "../context";
import { ApiError, validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import * as Idempotency from "../store/idempotency";
import { TriggerBody } from "./run-endpoints";
import { RESERVED_INPUT_KEYS, workflowSchemas } from "../workflow/schemas";
import { needsChainRead, triggerStepOutput } from "./trigger-output";
import { runQueued } from "./runner";
import { log } from "../log";
import type { TriggerResult } from "./schemas";
import { claimExecution, handOver, recoverClaimedExecution } from "./claim";
import { requireBus } from "./bus/install";
import { useConfig, useRuntime } from "../current-runtime";
import { type TriggerType } from "../kinds/shapes";
import { type WorkflowRecord } from "../workflow/record";
import { ownedForTrigger } from "../workflow/record-cache";
import { onChange } from "./execution-stored";
import { readSummary } from "./execution-read";

interface TriggerRequest {
  triggerType: TriggerType;
  triggerOutput?: Record<string, unknown>;
  triggerInput?: Record<string, unknown>;
  isBlocking: boolean;
}

export interface TriggerAnswer {
  status: 200 | 202;
  result: TriggerResult;
  /** `/executions/{executionId}?workflowId={id}` on 202. */
  location?: string;
  replayed: boolean;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const POLL_MS = 100;
const MAX_POLL_MS = 500;
/** A wait for a run in this process reads again after this long without a change notification. */
const NOTIFIED_POLL_MS = 2_000;

// ---------------------------------------------------------------------------------------------------------
// The request

/** Body fields (§8.8.7), every problem together; `triggerOutput` of a manual trigger takes only its three members. */
function parseRequest(body: Record<string, unknown>): TriggerRequest {
  const parsed = v.safeParse(TriggerBody, body, { abortEarly: false });
  const errors: FieldError[] = parsed.success ? [] : fieldErrors(parsed.issues, "body");
  if (body.triggerType === "manual" && isObject(body.triggerOutput)) {
    const manual = v.safeParse(workflowSchemas(useConfig().limits).ManualTriggerOutput, body.triggerOutput, { abortEarly: false });
    if (!manual.success)
      errors.push(...fieldErrors(manual.issues, "body").map((e) => ({ ...e, path: e.path.replace(/^body/, "body.triggerOutput") })));
  }
  if (isObject(body.triggerInput)) {
    for (const key of Object.keys(body.triggerInput)) {
      const problem = !IDENTIFIER.test(key)
        ? "must be an identifier"
        : key === "settings"
          ? "settings cannot be replaced by triggerInput"
          : (RESERVED_INPUT_KEYS as readonly string[]).includes(key)
            ? `must not be one of ${RESERVED_INPUT_KEYS.join(", ")}`
            : undefined;
      if (problem) errors.push({ path: `body.triggerInput.${key}`, message: problem });
    }
  }
  if (errors.length > 0 || !parsed.success) throw validationFailed(errors);
  const out = parsed.output;
  // For manual, members sent as null count as absent (the config's value applies), as everywhere in the API.
  const triggerOutput = out.triggerType === "manual" && out.triggerOutput ? dropNulls(out.triggerOutput) : out.triggerOutput;
  return {
    triggerType: out.triggerType,
    ...(triggerOutput !== undefined ? { triggerOutput } : {}),
    ...(out.triggerInput !== undefined ? { triggerInput: out.triggerInput } : {}),
    isBlocking: out.isBlocking === true,
  };
}

function checkAgainstWorkflow(request: TriggerRequest, workflow: WorkflowRecord) {
  if (request.triggerType !== workflow.trigger.type) {
    throw validationFailed(
      [{ path: "body.triggerType", message: `must be the workflow's trigger type (${workflow.trigger.type})` }],
      "TRIGGER_TYPE_MISMATCH",
    );
  }
  const names = new Set([workflow.trigger.name, ...workflow.nodes.map((n) => n.name)]);
  const clashes = Object.keys(request.triggerInput ?? {}).filter((key) => names.has(key));
  if (clashes.length > 0) {
    throw validationFailed(
      clashes.map((key) => ({ path: `body.triggerInput.${key}`, message: "must not be a trigger or node name of the workflow" })),
    );
  }
}

// ---------------------------------------------------------------------------------------------------------
// Trigger

export async function trigger(rawId: string, body: Record<string, unknown>, idempotencyKey: string | undefined): Promise<TriggerAnswer> {
  const request = parseRequest(body);
  const owner = useOwner();
  const { workflow, cached } = await lookUp(rawId, request, idempotencyKey === undefined);

  const key = idempotencyKey ? { owner, scope: `trigger#${workflow.id}`, key: idempotencyKey } : undefined;
  let executionId = ulid(useRuntime().now());
  let leaseUntil = Infinity;
  if (key) {
    const claim = await Idempotency.claim(key, {
      fingerprint: Idempotency.bodyFingerprint(body),
      operationId: executionId,
      // a crashed request's claim: its execution, written now from its marker if the crash came before
      recover: async (id) =>
        (await recoverClaimedExecution(workflow.id, id)) ? { executionId: id, blocking: request.isBlocking } : undefined,
    });
    if (claim.kind === "replay") return replay(workflow.id, claim.outcome);
    ({ operationId: executionId, leaseUntil } = claim);
  }

  let startAt: number;
  try {
    startAt = await claimRun(workflow, cached, request, executionId, leaseUntil);
  } catch (err) {
    // Only a refusal (404, 412, a lease run out) claimed nothing for sure; after anything else the count update may
    // have landed, so the key stays in progress and a repeat after the lease finds the claim by its execution id.
    if (key && err instanceof ApiError) await Idempotency.release(key, leaseUntil);
    throw err;
  }
  if (key) await Idempotency.complete(key, executionId, { executionId, blocking: request.isBlocking });

  if (request.isBlocking) {
    // The wait counts from here, time queued included. When it runs out the answer is the current state
    // (`pending`) and the run goes on, queued or running, here or in the runner.
    const deadline = useRuntime().now() + useConfig().limits.blockingTriggerWaitMs;
    if (requireBus().remote) {
      const handed = await handOver(workflow.id, executionId, workflow.owner);
      const result = handed ? await resultBy(workflow.id, executionId, deadline) : await currentResult(workflow.id, executionId);
      return { status: 200, result, replayed: false };
    }
    // In the owner's turn like any run (run-queue.ts).
    const run = runQueued(workflow.owner, workflow.id, executionId);
    run.catch((err: unknown) => log.error("blocking run failed", { workflowId: workflow.id, executionId, error: (err as Error).message }));
    await settledOrAt(run, deadline);
    return { status: 200, result: await currentResult(workflow.id, executionId), replayed: false };
  }
  const handed = await handOver(workflow.id, executionId, workflow.owner);
  const result: TriggerResult = handed ? { executionId, status: "pending", startAt } : await currentResult(workflow.id, executionId);
  return { status: 202, result, location: locationOf(workflow.id, executionId), replayed: false };
}

/**
 * The workflow lookup (404) and the checks against it (400), in the contract's order. Without an Idempotency-Key
 * the process's cached record may serve (its definition never changes; the claim's count update decides the
 * rest), so a trigger of a workflow this process has seen reads nothing before its claim; a check that fails on
 * a cached record is confirmed on the record read now (a deleted workflow answers 404, not 400).
 */
async function lookUp(rawId: string, request: TriggerRequest, useCache: boolean) {
  const found = await ownedForTrigger(rawId, useCache);
  try {
    checkAgainstWorkflow(request, found.record);
  } catch (err) {
    if (!found.cached) throw err;
    const fresh = await ownedForTrigger(rawId, false);
    checkAgainstWorkflow(request, fresh.record);
    return { workflow: fresh.record, cached: false };
  }
  return { workflow: found.record, cached: found.cached };
}

/**
 * The claim: the execution record `pending` (trigger step included) with the next index, under `executionId`. Its
 * first side effect comes in the first half of the Idempotency-Key's lease or never: a repeat may take the key over
 * once the lease has ended, and must find the claim by then or be the only one to make it.
 */
async function claimRun(
  workflow: WorkflowRecord,
  cached: boolean,
  request: TriggerRequest,
  executionId: string,
  leaseUntil: number,
): Promise<number> {
  const now = useRuntime().now();
  if (now >= leaseUntil - useConfig().limits.idempotencyLeaseMs / 2) throw leaseEnded();
  // A block trigger without `triggerOutput` reads its chain at run time (the claim records its step as `{data: null}`).
  const readsChain = needsChainRead(workflow.trigger, request.triggerOutput);
  await claimExecution(workflow.id, {
    now,
    owner: workflow.owner,
    workflow,
    cached,
    executionId,
    runInput: {
      ...(readsChain ? {} : { triggerOutput: triggerStepOutput(workflow.trigger, request.triggerOutput, now) }),
      ...(request.triggerInput ? { triggerInput: request.triggerInput } : {}),
    },
  });
  return now;
}

/** Not a refusal: the key stays in progress, and a repeat after the lease performs the claim under the same id. */
const leaseEnded = () => new Error("the Idempotency-Key's lease ended before the claim: left to a repeat");

// ---------------------------------------------------------------------------------------------------------
// Replays and answers

async function replay(workflowId: string, outcome: Record<string, unknown>): Promise<TriggerAnswer> {
  const executionId = String(outcome.executionId);
  if (outcome.blocking === true) {
    const deadline = useRuntime().now() + useConfig().limits.blockingTriggerWaitMs;
    return { status: 200, result: await resultBy(workflowId, executionId, deadline), replayed: true };
  }
  return {
    status: 202,
    result: await currentResult(workflowId, executionId),
    location: locationOf(workflowId, executionId),
    replayed: true,
  };
}

/**
 * The execution's result once it has ended, or at `deadline` as it stands then. With the in-process bus every run
 * is this process's, and it notifies its changes (Executions.onChange): the wait reads the record once, then only
 * when woken by a change (and every 2 s in case of one it could not see). With a remote bus (AWS: the runner
 * function runs it) the record is read every 100 ms, backing off to 500 ms. The waits hold a timer that keeps the
 * event loop alive, so a Lambda invocation waiting here is not ended as an empty event loop (Runtime.NodeJsExit).
 */
async function resultBy(workflowId: string, executionId: string, deadline: number): Promise<TriggerResult> {
  const notified = !requireBus().remote;
  let changed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = onChange(workflowId, executionId, () => {
    changed = true;
    wake?.();
  });
  try {
    let result = await currentResult(workflowId, executionId);
    const first = notified ? NOTIFIED_POLL_MS : POLL_MS;
    const most = notified ? NOTIFIED_POLL_MS : MAX_POLL_MS;
    for (let pause = first; result.status === "pending" && useRuntime().now() < deadline; pause = Math.min(pause * 1.5, most)) {
      if (!changed) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pause, Math.max(0, deadline - useRuntime().now())));
          wake = () => (clearTimeout(timer), resolve());
        });
        wake = undefined;
      }
      changed = false;
      result = await currentResult(workflowId, executionId);
    }
    return result;
  } finally {
    unsubscribe();
  }
}

/** Waits for `work` to settle or for `deadline`, whichever comes first, and leaves no timer behind. */
async function settledOrAt(work: Promise<unknown>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - useRuntime().now()))));
  try {
    await Promise.race([work.then(noop, noop), expiry]);
  } finally {
    clearTimeout(timer);
  }
}

async function currentResult(workflowId: string, executionId: string): Promise<TriggerResult> {
  const found = await readSummary(workflowId, executionId);
  if (!found) throw new Error(`execution ${executionId} of workflow ${workflowId} is missing`);
  return resultOf(found.summary);
}

const resultOf = (s: { id: string; status: TriggerResult["status"]; startAt: number; endAt?: number; error?: string }): TriggerResult => ({
  executionId: s.id,
  status: s.status,
  startAt: s.startAt,
  ...(s.endAt !== undefined ? { endAt: s.endAt } : {}),
  ...(s.error !== undefined ? { error: s.error } : {}),
});

const locationOf = (workflowId: string, executionId: string) => `/executions/${executionId}?workflowId=${workflowId}`;

// ---------------------------------------------------------------------------------------------------------

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
const dropNulls = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, value]) => value !== null));
const noop = () => undefined;
