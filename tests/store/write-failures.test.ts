/**
 * Why a write failed decides what happens next (shared/store/table.ts `classifyWriteFailure`): on AWS a
 * transaction is cancelled not only for a failed condition but also for a conflict with another transaction,
 * throttling or a validation error, which DynamoDB Local never produces. These tests inject each reason into the
 * table client of a real service and watch a run record its steps: a transient cancellation is sent again and the
 * run succeeds; a failed condition answers false (the run stops as for a deleted workflow); anything else throws.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TransactionCanceledException, TransactionConflictException } from "@aws-sdk/client-dynamodb";
import { startService, type TestService } from "../support/service";
import { executionPath, jsonClient, type Owner } from "../support/client";
import { classifyWriteFailure, refusalReasons, retryTransient, WRITE_ATTEMPTS } from "../../shared/store/table";

let service: TestService;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
let alice: Owner;

/** Which transactions fail (those `touches` picks), and how. */
let injection: { touches: (input: unknown) => boolean; fail: (attempt: number) => Error | undefined; attempts: number } | undefined;

const cancelled = (code: string) =>
  new TransactionCanceledException({
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${code}, None]`,
    $metadata: {},
    CancellationReasons: [{ Code: code }, { Code: "None" }],
  });

/** True when a TransactWriteItems request writes to `workflowId`'s executions (a step recorded, a run finished). */
function touchesExecutions(input: unknown, workflowId: string): boolean {
  const items = (input as { TransactItems?: { Update?: { Key?: { pk?: unknown } } }[] }).TransactItems ?? [];
  return items.some((item) => JSON.stringify(item.Update?.Key?.pk ?? "").includes(`WF#${workflowId}#EXEC`));
}

/** True when a TransactWriteItems request puts a workflow record (a create, with its slot counter). */
function createsWorkflow(input: unknown): boolean {
  const items = (input as { TransactItems?: { Put?: { Item?: { sk?: unknown } } }[] }).TransactItems ?? [];
  return items.some((item) => item.Put?.Item?.sk === "WORKFLOW");
}

beforeAll(async () => {
  service = await startService();
  // Before the SDK's own retry and signing, as a cancellation answered by DynamoDB reaches the caller.
  service.runtime.db.middlewareStack.add(
    (next, context) => async (args) => {
      const input: unknown = args.input;
      if (injection && context.commandName?.startsWith("TransactWrite") && injection.touches(input)) {
        injection.attempts += 1;
        const error = injection.fail(injection.attempts);
        if (error) throw error;
      }
      return next(args);
    },
    { step: "initialize", name: "injectCancellation", priority: "high" },
  );
  alice = await ownerWithWallet();
});

afterAll(async () => {
  await service?.close();
});

const code = (id: string, source: string) => ({ id, name: id, type: "customCode", config: { source } });

/** A manual run of two steps (the first recorded by a transaction, the second written before the finish, plainly), under `fail`. */
async function runUnder(fail: (attempt: number) => Error | undefined) {
  const wf = await createWorkflow(alice, {
    trigger: { id: "t", name: "start", type: "manual", config: {} },
    nodes: [code("a", "return 1"), code("b", "return 2")],
    edges: [
      { id: "e1", source: "t", target: "a" },
      { id: "e2", source: "a", target: "b" },
    ],
  });
  injection = { touches: (input) => touchesExecutions(input, wf.id), fail, attempts: 0 };
  try {
    const res = await call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" });
    expect(res.status).toBe(202);
    const execution = await waitTerminal(alice, executionPath(wf.id, res.body.executionId), { timeoutMs: 30_000 });
    return { execution, attempts: injection.attempts };
  } finally {
    injection = undefined;
  }
}

describe("a cancelled transaction is read by its reasons", () => {
  for (const reason of ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"]) {
    it(`${reason}: the step's transaction is sent again and the run succeeds (not "workflow was deleted")`, async () => {
      // The first attempt is cancelled, the second lands; the finish and its last step are plain writes.
      const { execution, attempts } = await runUnder((attempt) => (attempt % 2 === 1 ? cancelled(reason) : undefined));
      expect(execution.status, JSON.stringify(execution.error)).toBe("success");
      expect(execution.steps.map((s: { id: string }) => s.id)).toEqual(["t", "a", "b"]);
      expect(attempts).toBe(2);
    });
  }

  it("ConditionalCheckFailed: the write answers false (the run is told the execution ended, and stops)", async () => {
    const { execution } = await runUnder((attempt) => (attempt === 1 ? cancelled("ConditionalCheckFailed") : undefined));
    expect(execution.status).toBe("error");
    expect(execution.error).toBe("workflow was deleted");
  });

  it("ValidationError: the write throws, is not retried, and is not taken for a deleted workflow", async () => {
    const { execution, attempts } = await runUnder((attempt) => (attempt === 1 ? cancelled("ValidationError") : undefined));
    expect(execution.status).toBe("error");
    expect(execution.error).toBe("internal error: the engine could not run the workflow");
    expect(attempts).toBe(1);
  });
});

describe("callers that read each item's reason", () => {
  it("a create whose transaction is cancelled for a validation error answers 500 at once, not retried as a conflict", async () => {
    const bob = await ownerWithWallet();
    injection = { touches: createsWorkflow, fail: () => cancelled("ValidationError"), attempts: 0 };
    try {
      const res = await call(bob, "POST", "/workflows", {
        smartWalletAddress: bob.wallet,
        trigger: { id: "t", name: "start", type: "manual", config: {} },
        nodes: [code("a", "return 1")],
        edges: [{ id: "e1", source: "t", target: "a" }],
      });
      expect(res.status).toBe(500);
      expect(injection.attempts).toBe(1);
    } finally {
      injection = undefined;
    }
    const counted = await call(bob, "GET", "/workflows:count");
    expect(counted.body.total).toBe(0);
  });

  it("refusalReasons: each item's reason for a failed condition or a spent transient cause; anything else thrown", () => {
    expect(refusalReasons(cancelled("ConditionalCheckFailed"))).toEqual(["ConditionalCheckFailed", "None"]);
    expect(refusalReasons(cancelled("TransactionConflict"))).toEqual(["TransactionConflict", "None"]);
    expect(() => refusalReasons(cancelled("ValidationError"))).toThrow(TransactionCanceledException);
    expect(() => refusalReasons(Object.assign(new Error("x"), { name: "ConditionalCheckFailedException" }))).toThrow("x");
  });
});

describe("classifyWriteFailure and retryTransient", () => {
  it("names each failure: condition, retry or error", () => {
    const plain = (name: string) => Object.assign(new Error(name), { name });
    expect(classifyWriteFailure(plain("ConditionalCheckFailedException"))).toBe("condition");
    expect(classifyWriteFailure(new TransactionConflictException({ message: "conflict", $metadata: {} }))).toBe("retry");
    expect(classifyWriteFailure(plain("ThrottlingException"))).toBe("retry");
    expect(classifyWriteFailure(plain("ValidationException"))).toBe("error");
    expect(classifyWriteFailure(cancelled("ConditionalCheckFailed"))).toBe("condition");
    for (const code of ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"])
      expect(classifyWriteFailure(cancelled(code))).toBe("retry");
    expect(classifyWriteFailure(cancelled("ValidationError"))).toBe("error");
    expect(classifyWriteFailure(cancelled("ItemCollectionSizeLimitExceeded"))).toBe("error");
  });

  it("a transient failure that persists is sent a bounded number of times, then thrown", async () => {
    let sent = 0;
    const always = () => {
      sent += 1;
      return Promise.reject(cancelled("TransactionConflict"));
    };
    await expect(retryTransient(always)).rejects.toMatchObject({ name: "TransactionCanceledException" });
    expect(sent).toBe(WRITE_ATTEMPTS);
  });
});
