/**
 * Records on the wire (API.md §18.2) over the real HTTP server and DynamoDB Local: one Execution answer
 * (GET /executions/{id}, and the same object in every list) is at most `max_execution_record_bytes`, its largest
 * outputs replaced with `{data: null, truncated: true, originalSize}` until it fits; a list page is at most
 * `max_list_page_bytes` and ends early after the last whole item that fits (hasNextPage true, endCursor there),
 * and following the cursors visits every item exactly once. Sizes are the bytes of the body as received.
 * The first block runs at the real 4 MiB / 5 MiB defaults; the others lower the limits to probe more cases fast:
 * step items written before outputs had items of their own (v 1), the reads a list and a retrieve make, the
 * last resort for records whose logs alone pass the limit, `before` pages, and the workflows list.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ulid } from "ulid";
import * as v from "valibot";
import { PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Owner as SignedInOwner } from "../support/client";
import { bearer, insertPending, randomOwner as newOwner, triggerStep } from "../support/fixtures";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { Execution as ExecutionSchema, ExecutionPage } from "../../shared/execution/schemas";
import { type Step } from "../../shared/engine/schemas";
import type { Runtime } from "../../shared/current-runtime";
import * as ExecutionWrite from "../../shared/execution/execution-write";

type Owner = `0x${string}`;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MiB = 1_048_576;

let runtime: Runtime;
let server: TestServer;
const { call, ownerWithWallet } = jsonClient(() => server.url);

beforeAll(async () => {
  // The server reads whichever runtime is current: each block below installs its own (own table, own limits).
  runtime = await useTestRuntime();
  server = await startTestServer(createServiceApp());
});
afterAll(async () => server?.close());

/** GET as `owner`: status, the body's bytes as received, and the parsed body. */
async function get(owner: Owner, path: string) {
  const res = await fetch(server.url + path, { headers: await bearer(owner) });
  const raw = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes: raw.length, body: JSON.parse(raw.toString("utf8")) as Json };
}

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
const marker = (originalSize: number) => ({ data: null, truncated: true, originalSize });

/** An output of exactly `bytes` serialized bytes. */
const outputOf = (bytes: number, fill = "x") => ({ data: fill.repeat(bytes - bytesOf({ data: "" })) });

const nodeStep = (id: string, startAt: number, outputBytes: number, extra: Partial<Step> = {}): Step => ({
  id,
  type: "customCode",
  name: id,
  success: true,
  config: { source: `return ${id}` },
  output: outputOf(outputBytes),
  startAt,
  endAt: startAt + 1,
  ...extra,
});

/** A pending execution as the claim writes it; its steps recorded as the runner records them; then finished. */
async function insert(owner: Owner, workflowId: string, startAt: number, steps: Step[] = [], finish = true) {
  const id = await insertPending(owner, workflowId, startAt);
  for (const [i, step] of steps.entries()) expect(await ExecutionWrite.recordStep(workflowId, id, step, undefined, i)).toBe(true);
  if (finish) expect(await ExecutionWrite.finish(workflowId, id, { status: "success", endAt: startAt + 1000 })).toBe(true);
  return id;
}

/** The record's node steps by id. */
const byId = (execution: Json) => new Map<string, Step>((execution.steps as Step[]).map((s) => [s.id, s]));

/**
 * Checks the §18.2 bound on one answer: within `max`, every step not in `replaced` exactly as recorded, the
 * replaced ones marked with their recorded size, they are the largest outputs, and no fewer would have done.
 */
function expectBounded(answer: { bytes: number; body: Json }, recorded: Step[], max: number) {
  expect(answer.bytes).toBeLessThanOrEqual(max);
  expect(v.safeParse(ExecutionSchema, answer.body).issues).toBeUndefined();
  const got = byId(answer.body);
  const replaced: number[] = [];
  const kept: number[] = [];
  for (const step of recorded) {
    const answered = got.get(step.id)!;
    const size = bytesOf(step.output);
    if (JSON.stringify(answered.output) === JSON.stringify(marker(size)) && JSON.stringify(step.output) !== JSON.stringify(marker(size))) {
      expect({ ...answered, output: step.output }).toEqual(step);
      replaced.push(size);
    } else {
      expect(answered).toEqual(step);
      kept.push(size);
    }
  }
  expect(replaced.length).toBeGreaterThan(0);
  // Largest first: every replaced output is at least as large as every kept one.
  expect(Math.min(...replaced)).toBeGreaterThanOrEqual(Math.max(...kept));
  // Only as many as needed: putting back the smallest replaced one would pass the limit.
  const smallest = Math.min(...replaced);
  expect(answer.bytes + smallest - bytesOf(marker(smallest))).toBeGreaterThan(max);
  return { replaced, kept };
}

/** Follows `after` from the first page to the last; answers every page. */
async function walkForward(owner: Owner, path: string) {
  const pages: { bytes: number; body: Json }[] = [];
  let after: string | undefined;
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await get(owner, `${path}${after ? `${sep}after=${after}` : ""}`);
    expect(page.status).toBe(200);
    pages.push(page);
    if (!page.body.pageInfo.hasNextPage) return pages;
    after = page.body.pageInfo.endCursor;
    expect(pages.length).toBeLessThan(100);
  }
}

describe("at the real limits: 4 MiB per execution, 5 MiB per page", () => {
  beforeAll(async () => {
    runtime = await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
    expect(runtime.config.limits.maxExecutionRecordBytes).toBe(4 * MiB);
    expect(runtime.config.limits.maxListPageBytes).toBe(5 * MiB);
  });

  it("answers a 4.6 MB record within 4 MiB, its largest outputs replaced and marked, here and in the lists", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 60_000;
    // 20 outputs from 200,000 to 247,500 bytes (each under the 256 KiB step limit), three small ones and a log.
    const steps = [
      ...Array.from({ length: 20 }, (_, i) => nodeStep(`big${i}`, t0 + 10 + i, 200_000 + ((i * 7) % 20) * 2_500)),
      nodeStep("small", t0 + 40, 2_000),
      nodeStep("tiny", t0 + 41, 100, { log: "l".repeat(60_000) }),
      nodeStep("failed", t0 + 42, 30, { success: false, error: "boom", errorCode: "SANDBOX_ERROR", output: { data: null } }),
    ];
    const id = await insert(owner, wf, t0, steps);
    const full = steps.reduce((sum, s) => sum + bytesOf(s), 0);
    expect(full).toBeGreaterThan(4.5e6);

    const one = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(one.status).toBe(200);
    const { replaced } = expectBounded(one, steps, 4 * MiB);
    expect(replaced.sort((a, b) => b - a)).toEqual([247_500, 245_000]);
    expect(one.body.steps[0]).toEqual(triggerStep(t0));

    // A list element is the same object, bounded the same way.
    for (const path of [`/workflows/${wf}/executions`, `/executions?workflowId=${wf}`, "/executions"]) {
      const page = await get(owner, path);
      expect(page.bytes).toBeLessThanOrEqual(5 * MiB);
      expect(page.body.data).toEqual([one.body]);
      expect(page.body.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
    }
  });

  it("ends a page whose executions pass 5 MiB after the last whole one that fits; the cursor visits each once", async () => {
    const owner = newOwner();
    const wfs = [ulid(), ulid()];
    const t0 = Date.now() - 3_600_000;
    // Five executions of ~1.84 MB each (eight 230,000-byte outputs): two fit a page, three do not.
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const steps = Array.from({ length: 8 }, (_, j) => nodeStep(`n${j}`, t0 + i * 1000 + j + 1, 230_000));
      ids.push(await insert(owner, wfs[i % 2]!, t0 + i * 1000, steps));
    }
    const newestFirst = [...ids].reverse();

    const pages = await walkForward(owner, "/executions");
    expect(pages.map((p) => p.body.data.length)).toEqual([2, 2, 1]);
    expect(pages[0]!.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    expect(pages[1]!.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    expect(pages[2]!.body.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    expect(pages.flatMap((p) => p.body.data.map((e: Json) => e.id))).toEqual(newestFirst);
    for (const page of pages) {
      expect(page.bytes).toBeLessThanOrEqual(5 * MiB);
      expect(v.safeParse(ExecutionPage, page.body).issues).toBeUndefined();
      // Whole items: every execution with all its steps, untouched (each is far below 4 MiB).
      for (const e of page.body.data as Json[]) {
        expect(e.steps).toHaveLength(9);
        expect((e.steps as Step[]).every((s) => !JSON.stringify(s.output).includes('"truncated"'))).toBe(true);
      }
    }
    // The pages stopped early: one more execution would have passed 5 MiB.
    for (const i of [0, 1]) expect(pages[i]!.bytes + 1 + bytesOf(pages[i + 1]!.body.data[0])).toBeGreaterThan(5 * MiB);
    // endCursor is the last item's: the next page starts right after it.
    const next = await get(owner, `/executions?limit=1&after=${pages[0]!.body.pageInfo.endCursor}`);
    expect(next.body.data[0].id).toBe(newestFirst[2]);

    // The per-workflow list too.
    const perWorkflow = await walkForward(owner, `/workflows/${wfs[0]}/executions`);
    expect(perWorkflow.map((p) => p.body.data.length)).toEqual([2, 1]);
    expect(perWorkflow.flatMap((p) => p.body.data.map((e: Json) => e.id))).toEqual(newestFirst.filter((_, i) => i % 2 === 0));
  });
});

describe("at lowered limits: 64 KiB per execution, 200 KiB per page", () => {
  const MAX_RECORD = 65_536;
  const MAX_PAGE = 204_800;
  /** What the table was asked, for the reads each answer makes. */
  const sent: { command: string; input: string }[] = [];

  beforeAll(async () => {
    runtime = await useTestRuntime({
      MAX_EXECUTION_RECORD_BYTES: String(MAX_RECORD),
      MAX_LIST_PAGE_BYTES: String(MAX_PAGE),
      RATE_LIMIT_BURST: "100000",
      RATE_LIMIT_RPS: "10000",
    });
    runtime.db.middlewareStack.add(
      (next, context) => async (args) => {
        sent.push({ command: context.commandName ?? "", input: JSON.stringify(args.input) });
        return next(args);
      },
      { step: "initialize", name: "recordSizeTestLog" },
    );
  });

  const readsDuring = async <T>(fn: () => Promise<T>) => {
    sent.length = 0;
    const result = await fn();
    return { result, reads: [...sent] };
  };

  it("replaces the largest outputs and never reads them; small outputs inside the step count too", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 60_000;
    const sizes = [9_000, 21_000, 3_000, 17_000, 4_000, 25_000, 12_000, 2_500, 14_000];
    const steps = sizes.map((n, i) => nodeStep(`s${i}`, t0 + i + 1, n));
    const id = await insert(owner, wf, t0, steps);

    const { result: one, reads } = await readsDuring(() => get(owner, `/executions/${id}?workflowId=${wf}`));
    expect(one.status).toBe(200);
    const { replaced } = expectBounded(one, steps, MAX_RECORD);
    expect(replaced.sort((a, b) => b - a)).toEqual([25_000, 21_000]);
    // Outputs above 4 KiB lie in their own items: the answer read those it kept, none it replaced.
    const outputKeys = reads
      .filter((r) => r.command.startsWith("BatchGet"))
      .flatMap((r) => [...r.input.matchAll(/OUT#(s\d+)#/g)].map((m) => m[1]));
    expect(outputKeys.sort()).toEqual(["s0", "s3", "s6", "s8"]);
  });

  it("reads step items recorded before outputs had items of their own (v 1) and bounds them alike", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 60_000;
    const id = await insert(owner, wf, t0, [], false);
    const steps = [15_000, 30_000, 10_000, 20_000].map((n, i) => nodeStep(`old${i}`, t0 + i + 1, n));
    for (const [i, step] of steps.entries()) {
      const body = Buffer.from(JSON.stringify({ position: i, recordedAt: t0 + i, step }));
      await runtime.db.send(
        new PutCommand({
          TableName: runtime.config.tableName,
          Item: { ...Keys.executionStep(id, step.id, 0), type: "executionStep", v: 1, stepId: step.id, part: 0, parts: 1, body },
        }),
      );
    }
    await runtime.db.send(
      new UpdateCommand({
        TableName: runtime.config.tableName,
        Key: Keys.execution(wf, id),
        UpdateExpression: "ADD stepIds :ids",
        ExpressionAttributeValues: { ":ids": new Set(steps.map((s) => s.id)) },
      }),
    );
    const one = await get(owner, `/executions/${id}?workflowId=${wf}`);
    const { replaced } = expectBounded(one, steps, MAX_RECORD);
    expect(replaced).toEqual([30_000]);
    expect((await get(owner, `/workflows/${wf}/executions`)).body.data).toEqual([one.body]);
  });

  it("cuts logs and errors and leaves configs out, largest first, when replacing every output is not enough", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 60_000;
    const steps = Array.from({ length: 12 }, (_, i) =>
      nodeStep(`l${i}`, t0 + i + 1, 5_000, {
        log: "log ".repeat(2_000 + i * 100),
        success: false,
        error: "err ".repeat(1_000),
        errorCode: "SANDBOX_ERROR",
      }),
    );
    const id = await insert(owner, wf, t0, steps);
    const one = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(one.status).toBe(200);
    expect(one.bytes).toBeLessThanOrEqual(MAX_RECORD);
    expect(v.safeParse(ExecutionSchema, one.body).issues).toBeUndefined();
    const got = [...byId(one.body).values()].slice(1);
    expect(got.every((s) => JSON.stringify(s.output) === JSON.stringify(marker(5_000)))).toBe(true);
    const cut = got.filter((s) => s.log!.endsWith("…[truncated]"));
    expect(cut.length).toBeGreaterThan(0);
    for (const s of cut) expect(Buffer.byteLength(s.log!)).toBeLessThanOrEqual(256);
    // Largest first: the longest logs (the later steps) were cut before any shorter one.
    const cutIds = new Set(cut.map((s) => s.id));
    expect(got.map((s) => cutIds.has(s.id))).toEqual(got.map((_, i) => i >= got.length - cut.length));
  });

  describe("a list of 14 executions of 10-60 KB", () => {
    const owner = newOwner();
    const wf = ulid();
    let newestFirst: string[] = [];
    let expected = new Map<string, Json>();

    beforeAll(async () => {
      const t0 = Date.now() - 3_600_000;
      const ids: string[] = [];
      for (let i = 0; i < 14; i++) {
        const outputs = Array.from({ length: 1 + (i % 5) }, (_, j) => 9_000 + ((i + j) % 3) * 1_000);
        ids.push(
          await insert(
            owner,
            wf,
            t0 + i * 1000,
            outputs.map((n, j) => nodeStep(`n${j}`, t0 + i * 1000 + j + 1, n)),
          ),
        );
      }
      newestFirst = ids.reverse();
      expected = new Map();
      for (const id of newestFirst) expected.set(id, (await get(owner, `/executions/${id}?workflowId=${wf}`)).body);
    });

    it("pages forward: each page within 200 KiB, ended early with hasNextPage, every execution once and whole", async () => {
      for (const path of ["/executions?limit=200", `/workflows/${wf}/executions?limit=200`]) {
        const pages = await walkForward(owner, path);
        expect(pages.length).toBeGreaterThan(2);
        expect(pages.flatMap((p) => p.body.data.map((e: Json) => e.id))).toEqual(newestFirst);
        for (const [i, page] of pages.entries()) {
          expect(page.bytes).toBeLessThanOrEqual(MAX_PAGE);
          expect(page.body.pageInfo.hasPreviousPage).toBe(i > 0);
          for (const e of page.body.data as Json[]) expect(e).toEqual(expected.get(e.id));
          // Ended early: the next execution would not have fitted.
          if (i < pages.length - 1) expect(page.bytes + 1 + bytesOf(pages[i + 1]!.body.data[0])).toBeGreaterThan(MAX_PAGE);
        }
      }
    });

    it("pages backward with before: each page keeps the executions nearest its cursor, every execution once", async () => {
      const forward = await walkForward(owner, "/executions?limit=200");
      const seen: string[][] = [];
      let before: string = forward[forward.length - 1]!.body.pageInfo.startCursor;
      seen.push(forward[forward.length - 1]!.body.data.map((e: Json) => e.id));
      for (;;) {
        const page = await get(owner, `/executions?limit=200&before=${before}`);
        expect(page.bytes).toBeLessThanOrEqual(MAX_PAGE);
        expect(page.body.pageInfo.hasNextPage).toBe(true);
        seen.unshift(page.body.data.map((e: Json) => e.id));
        if (!page.body.pageInfo.hasPreviousPage) break;
        before = page.body.pageInfo.startCursor;
        expect(seen.length).toBeLessThan(50);
      }
      expect(seen.flat()).toEqual(newestFirst);
    });

    it("reads the steps of the executions it answers and at most one more", async () => {
      const { result: page, reads } = await readsDuring(() => get(owner, "/executions?limit=200"));
      const answered = page.body.data.length;
      expect(answered).toBeLessThan(newestFirst.length);
      const stepReads = new Set(
        reads.filter((r) => r.command === "QueryCommand").flatMap((r) => [...r.input.matchAll(/EXEC#([0-9A-Z]{26})/g)].map((m) => m[1])),
      );
      expect(stepReads.size).toBeLessThanOrEqual(answered + 1);
      for (const e of page.body.data as Json[]) expect(stepReads.has(e.id)).toBe(true);
    });

    it("still honours limit, and a page cut by size and one cut by limit continue alike", async () => {
      const small = await get(owner, "/executions?limit=2");
      expect(small.body.data.map((e: Json) => e.id)).toEqual(newestFirst.slice(0, 2));
      const rest = await get(owner, `/executions?limit=200&after=${small.body.pageInfo.endCursor}`);
      expect(rest.body.data[0].id).toBe(newestFirst[2]);
    });
  });

  it("ends a page of the workflows list early too (GET /workflows), every workflow once", async () => {
    const who: SignedInOwner = await ownerWithWallet();
    const created: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await call(who, "POST", "/workflows", {
        name: `big ${i}`,
        smartWalletAddress: who.wallet.toLowerCase(),
        trigger: { name: "start", type: "manual", config: { data: {} } },
        nodes: [{ id: "code", name: "code", type: "customCode", config: { source: `return "${"w".repeat(60_000)}"` } }],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      created.push(res.body.id);
    }
    const pages: Json[] = [];
    let after: string | undefined;
    do {
      const res = await fetch(`${server.url}/workflows?limit=200${after ? `&after=${after}` : ""}`, { headers: who.headers });
      const raw = Buffer.from(await res.arrayBuffer());
      expect(res.status).toBe(200);
      expect(raw.length).toBeLessThanOrEqual(MAX_PAGE);
      const body = JSON.parse(raw.toString("utf8")) as Json;
      pages.push(body);
      after = body.pageInfo.hasNextPage ? body.pageInfo.endCursor : undefined;
    } while (after && pages.length < 20);
    expect(pages.length).toBeGreaterThan(1);
    expect(pages[0]!.pageInfo.hasNextPage).toBe(true);
    expect(pages.flatMap((p) => p.data.map((w: Json) => w.id))).toEqual(created.reverse());
  });
});
