/**
 * Expiry in the background (API.md §8.2): the sweeper's pass stores workflows past `expiredAt` completed / EXPIRED
 * with `completedAt = expiredAt`, frees their active slot, and removes their schedule and watch entries. Workflows
 * are created, paused and read over the real HTTP server; the pass is run directly, as the sweeper runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Owner } from "../support/client";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { scheduleKey } from "../../shared/store/entities/schedule";
import { expireDue } from "../../shared/workflow/lifecycle";
import type { Runtime } from "../../shared/current-runtime";

let runtime: Runtime;
let server: TestServer;
let owner: Owner;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => server.url);

beforeAll(async () => {
  runtime = await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  server = await startTestServer(createServiceApp());
  owner = await ownerWithWallet();
});

afterAll(async () => {
  await server?.close();
});

const cron = { id: "t", name: "t", type: "cron", config: { schedules: ["*/5 * * * *"] } };
/** A time trigger with an instant before `expiredAt`, so it has a schedule entry (no loop delivers it here). */
const fixedTime = (expiredAt: number) => ({ id: "t", name: "t", type: "fixedTime", config: { epochs: [expiredAt - 500] } });
const block = { id: "t", name: "t", type: "block", config: { interval: 3 } };

const item = async (key: { pk: string; sk: string }) =>
  (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: key, ConsistentRead: true }))).Item;
const activeSlots = async () => Number((await item(Keys.counter(owner.owner, "activeWorkflows")))?.count ?? 0);

describe("workflow expiry in the background", () => {
  it("a pass stores workflows past expiredAt completed / EXPIRED, frees their slots, removes schedule and watch entries; a second pass does nothing", async () => {
    // expireDue takes the pass's clock: a pass at expiredAt + 100 ms stands for one run after the deadline.
    const expiredAt = Date.now() + 60_000;
    const after = expiredAt + 100;
    const timed = await createWorkflow(owner, { trigger: fixedTime(expiredAt), expiredAt });
    const watched = await createWorkflow(owner, { trigger: block, expiredAt });
    const paused = await createWorkflow(owner, { trigger: fixedTime(expiredAt), expiredAt });
    const lasting = await createWorkflow(owner, { trigger: cron, expiredAt: Date.now() + 3_600_000 });
    const forever = await createWorkflow(owner, { trigger: block });
    expect((await call(owner, "POST", `/workflows/${paused.id}:pause`)).status).toBe(200);

    expect(await item(scheduleKey(timed.id))).toBeDefined();
    expect(await item(scheduleKey(lasting.id))).toBeDefined();
    expect(await item(Keys.watch(watched.id))).toBeDefined();
    expect(await item(Keys.expiry(timed.id))).toBeDefined();
    expect(await item(Keys.expiry(forever.id))).toBeUndefined(); // no expiredAt: no entry
    expect(await activeSlots()).toBe(4); // the paused one gave its slot back

    // Nothing is due yet: the pass leaves everything alone.
    expect(await expireDue(Date.now(), 100)).toEqual([]);
    expect((await item(Keys.workflow(timed.id)))?.status).toBe("enabled");

    const expired = await expireDue(after, 100);
    expect(expired.sort()).toEqual([timed.id, watched.id, paused.id].sort());

    for (const wf of [timed, watched, paused]) {
      const stored = await item(Keys.workflow(wf.id));
      expect(stored).toMatchObject({ status: "completed", completionReason: "EXPIRED", completedAt: expiredAt, holdsSlot: false });
      const answered = await call(owner, "GET", `/workflows/${wf.id}`);
      expect(answered.body).toMatchObject({ status: "completed", completionReason: "EXPIRED", completedAt: expiredAt });
      expect(await item(Keys.expiry(wf.id))).toBeUndefined();
    }
    expect(await item(scheduleKey(timed.id))).toBeUndefined();
    expect(await item(scheduleKey(paused.id))).toBeUndefined();
    expect(await item(Keys.watch(watched.id))).toBeUndefined();
    expect(await activeSlots()).toBe(2); // lasting + forever
    expect(await item(scheduleKey(lasting.id))).toBeDefined();
    expect(await item(Keys.watch(forever.id))).toBeDefined();
    expect((await item(Keys.workflow(lasting.id)))?.status).toBe("enabled");

    // A second pass finds nothing due and changes nothing.
    const before = await item(Keys.workflow(timed.id));
    expect(await expireDue(after, 100)).toEqual([]);
    expect(await item(Keys.workflow(timed.id))).toEqual(before);
    expect(await activeSlots()).toBe(2);
  });

  it("cancel deletes the expiry entry; an entry left by an interrupted pass is cleaned up by the next one without counting twice", async () => {
    const cancelled = await createWorkflow(owner, { trigger: cron, expiredAt: Date.now() + 3_600_000 });
    expect(await item(Keys.expiry(cancelled.id))).toBeDefined();
    expect((await call(owner, "DELETE", `/workflows/${cancelled.id}`)).status).toBe(204);
    expect(await item(Keys.expiry(cancelled.id))).toBeUndefined();

    // A workflow stored expired whose entry survived (a pass that died before its last step): the next pass far
    // in the future only removes the leftovers, and the slot is not released twice.
    const expiredAt = Date.now() + 60_000;
    const after = expiredAt + 100;
    const wf = await createWorkflow(owner, { trigger: block, expiredAt });
    const slots = await activeSlots();
    expect(await expireDue(after, 100)).toEqual([wf.id]);
    expect(await activeSlots()).toBe(slots - 1);
    await runtime.db.send(
      new PutCommand({
        TableName: runtime.config.tableName,
        Item: { ...Keys.expiry(wf.id), ...Keys.expiryDue(expiredAt, wf.id), type: "expiry", v: 1, workflowId: wf.id, expiredAt },
      }),
    );
    expect(await expireDue(after, 100)).toEqual([]);
    expect(await item(Keys.expiry(wf.id))).toBeUndefined();
    expect(await activeSlots()).toBe(slots - 1);
    expect(await item(Keys.workflow(wf.id))).toMatchObject({ status: "completed", completionReason: "EXPIRED", completedAt: expiredAt });
  });
});
