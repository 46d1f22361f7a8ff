/**
 * The workflow side's entities (shared/store/entities/): each writes the items the code before it wrote, attribute
 * for attribute (literal items, read back raw), and keeps the conditional invariants it owns under races.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { Keys } from "../../shared/store/item-keys";
import { useTestRuntime } from "../support/runtime";
import { transact } from "../../shared/store/entity";
import { acquireLease, deleteCheckpoint, readCheckpoint, releaseLease, storeCursors } from "../../shared/store/entities/checkpoint";
import * as Watch from "../../shared/workflow/watch-registry";
import {
  closedMarkers,
  closeIntent,
  intentKey,
  intentsInFlightBefore,
  markerOf,
  putIntent,
} from "../../shared/store/entities/claim-intent";
import { executionWritten, putClaimedExecution } from "../../shared/store/entities/execution";
import {
  completeItem,
  createItem,
  createDefinitionItem,
  readDefinitions,
  deleteItem,
  expiredSlotHolders,
  failItem,
  pauseItem,
  releaseExpiredSlotItem,
} from "../../shared/store/entities/workflow";
import { decrement, incrementBelow } from "../../shared/store/counters";
import { read, toItem } from "../../shared/workflow/stored";

/** A record as an item of v 2 stored it: the document inside. */
const withDocument = (record: WorkflowRecord) => {
  const { attributes, document } = toItem(record);
  return { ...attributes, document };
};
import type { WorkflowRecord } from "../../shared/workflow/record";
import { dueExpiries, forgetExpiry, putExpiry } from "../../shared/store/entities/expiry";
import * as Schedule from "../../shared/store/entities/schedule";
import type { Runtime } from "../../shared/current-runtime";

let runtime: Runtime;

beforeAll(async () => {
  runtime = await useTestRuntime();
});

const raw = async (key: { pk: string; sk: string }) =>
  (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: key, ConsistentRead: true }))).Item;

describe("expiry entry (pattern 21)", () => {
  it("writes the item the create transaction wrote, lists it when due, deletes it", async () => {
    const id = "01JEXPIRY00000000000000001";
    await transact([putExpiry(id, 1_700_000_000_000)]);
    expect(await raw({ pk: `WF#${id}`, sk: "EXPIRY" })).toEqual({
      pk: `WF#${id}`,
      sk: "EXPIRY",
      gsi3pk: expect.stringMatching(/^EXPIRY#due#[0-7]$/),
      gsi3sk: `001700000000000#${id}`,
      type: "expiry",
      v: 1,
      workflowId: id,
      expiredAt: 1_700_000_000_000,
    });
    expect(await dueExpiries(1_699_999_999_999, 10)).not.toContain(id);
    expect(await dueExpiries(1_700_000_000_000, 10)).toContain(id);
    await forgetExpiry(id);
    expect(await raw({ pk: `WF#${id}`, sk: "EXPIRY" })).toBeUndefined();
  });

  it("lists an entry written before gsi3 held the due keys (on gsi2) as well", async () => {
    const id = "01JEXPIRY00000000000000002";
    const { gsi3pk, gsi3sk } = Keys.expiryDue(1_600_000_000_000, id);
    const item = {
      pk: `WF#${id}`,
      sk: "EXPIRY",
      gsi2pk: gsi3pk,
      gsi2sk: gsi3sk,
      type: "expiry",
      v: 1,
      workflowId: id,
      expiredAt: 1_600_000_000_000,
    };
    await runtime.db.send(new PutCommand({ TableName: runtime.config.tableName, Item: item }));
    expect(await dueExpiries(1_600_000_000_000, 10)).toContain(id);
    await forgetExpiry(id);
  });
});

describe("local schedule item (pattern 16)", () => {
  const id = "01JSCHEDULE000000000000001";
  const owner = "0x00000000000000000000000000000000000000aA";

  it("writes the item the local scheduler wrote; advancing moves it on gsi2 and records the owner", async () => {
    await Schedule.putSchedule({ workflowId: id, owner, triggerId: "t", nextFireAt: 1_700_000_000_000 });
    expect(await raw(Schedule.scheduleKey(id))).toEqual({
      pk: `WF#${id}`,
      sk: "SCHEDULE",
      gsi2pk: "SCHEDULE#due",
      gsi2sk: `001700000000000#${id}`,
      type: "schedule",
      v: 1,
      workflowId: id,
      owner,
      triggerId: "t",
      nextFireAt: 1_700_000_000_000,
    });
    expect((await Schedule.dueSchedules(1_700_000_000_000, 10)).map((e) => e.workflowId)).toContain(id);
    expect(await Schedule.advanceSchedule(id, 1_700_000_000_000, 1_700_000_060_000, owner)).toBe(true);
    expect(await raw(Schedule.scheduleKey(id))).toMatchObject({ gsi2sk: `001700000060000#${id}`, nextFireAt: 1_700_000_060_000, owner });
    expect((await Schedule.dueSchedules(1_700_000_000_000, 10)).map((e) => e.workflowId)).not.toContain(id);
    expect(await Schedule.earliestSchedule()).toBe(1_700_000_060_000);
  });

  it("race: of concurrent advances and drops from one instant exactly one lands; a removed item is never resurrected", async () => {
    await Schedule.putSchedule({ workflowId: id, owner, triggerId: "t", nextFireAt: 1_800_000_000_000 });
    const results = await Promise.all([
      ...Array.from({ length: 6 }, (_, i) => Schedule.advanceSchedule(id, 1_800_000_000_000, 1_800_000_000_000 + (i + 1) * 1000, owner)),
      ...Array.from({ length: 4 }, () => Schedule.dropSchedule(id, 1_800_000_000_000)),
    ]);
    expect(results.filter(Boolean)).toHaveLength(1);
    await Schedule.removeSchedule(id);
    expect(await Schedule.advanceSchedule(id, 1_800_000_000_000, 1_900_000_000_000, owner)).toBe(false);
    expect(await raw(Schedule.scheduleKey(id))).toBeUndefined();
  });
});

describe("chain checkpoint and watcher lease (pattern 18)", () => {
  const chainId = 990_001;
  const key = { pk: `CHAIN#${chainId}`, sk: "CHECKPOINT" };

  it("writes the item the watcher wrote: the lease, then the cursors; release removes the lease only", async () => {
    expect(await acquireLease(chainId, "me", 1_000, 61_000)).toEqual({
      ...key,
      leaseOwner: "me",
      leaseUntil: 61_000,
      type: "chainCheckpoint",
      v: 2,
    });
    expect(await storeCursors(chainId, "me", { block: 42, behind: { A: 40 }, floors: { "-": 39 }, rev: "R1" }, 62_000)).toBe(true);
    expect(await raw(key)).toEqual({
      ...key,
      type: "chainCheckpoint",
      v: 2,
      leaseOwner: "me",
      leaseUntil: 62_000,
      block: 42,
      behind: { A: 40 },
      floors: { "-": 39 },
      rev: "R1",
    });
    await releaseLease(chainId, "me");
    expect(await readCheckpoint(chainId)).toEqual({
      ...key,
      type: "chainCheckpoint",
      v: 2,
      block: 42,
      behind: { A: 40 },
      floors: { "-": 39 },
      rev: "R1",
    });
    await deleteCheckpoint(chainId);
    expect(await raw(key)).toBeUndefined();
  });

  it("race: of concurrent acquirers exactly one holds the lease; the others neither store nor release it until it expires", async () => {
    const holders = Array.from({ length: 8 }, (_, i) => `h${i}`);
    const got = await Promise.all(holders.map((h) => acquireLease(chainId, h, 1_000, 61_000)));
    const winners = holders.filter((_, i) => got[i] !== null);
    expect(winners).toHaveLength(1);
    const loser = holders.find((h) => h !== winners[0])!;
    expect(await storeCursors(chainId, loser, { block: 1, behind: {}, floors: {}, rev: "X" }, 61_000)).toBe(false);
    await releaseLease(chainId, loser);
    expect(await raw(key)).toMatchObject({ leaseOwner: winners[0] });
    expect(await acquireLease(chainId, loser, 60_999, 120_999)).toBeNull();
    expect(await acquireLease(chainId, loser, 61_001, 121_001)).toMatchObject({ leaseOwner: loser });
    await deleteCheckpoint(chainId);
  });
});

describe("watch entry and its trigger item (pattern 19)", () => {
  const id = "01JWATCH000000000000000001";
  const entryKey = { pk: `WF#${id}`, sk: "WATCH" };
  const triggerKey = { pk: `WF#${id}`, sk: "WATCH#TRIGGER" };
  const small = { id: "t", name: "t", type: "block", config: { interval: 3 } };
  const large = {
    id: "t",
    name: "t",
    type: "event",
    config: { queries: [{ addresses: Array.from({ length: 60 }, (_, i) => `0x${String(i).padStart(40, "0")}`) }] },
  };

  it("writes the entry the registry wrote (trigger inline), and a large trigger in its own item", async () => {
    // What every entry of this workflow holds whatever its trigger.
    const entryItem = {
      ...entryKey,
      gsi2pk: "CHAIN#31337#WATCH",
      gsi2sk: id,
      type: "watch",
      v: 3,
      workflowId: id,
      chainId: 31337,
      owner: "0xabc0000000000000000000000000000000000001",
      expiredAt: 9_000_000,
    };
    const w = { id, chainId: 31337, owner: "0xAbC0000000000000000000000000000000000001", trigger: small, expiredAt: 9_000_000 };
    await Watch.watch(w as never, 1_000);
    expect(await raw(entryKey)).toEqual({
      ...entryItem,
      since: 1_000,
      trigger: JSON.stringify(small),
    });
    await Watch.unwatch(id);
    expect(await raw(entryKey)).toBeUndefined();

    await Watch.watch({ ...w, trigger: large } as never, 2_000);
    expect(await raw(triggerKey)).toEqual({ ...triggerKey, type: "watchTrigger", v: 1, since: 2_000, trigger: JSON.stringify(large) });
    expect(await raw(entryKey)).toEqual({
      ...entryItem,
      since: 2_000,
      triggerStored: true,
      triggerType: "event",
    });
    const listed = (await Watch.watchersOf(31337)).find((e) => e.workflowId === id);
    expect(listed?.trigger).toEqual(large);
    await Watch.unwatch(id, 1_999); // another entry's since: stays
    expect(await raw(entryKey)).toBeDefined();
    await Watch.unwatch(id, 2_000);
    expect(await raw(entryKey)).toBeUndefined();
    expect(await raw(triggerKey)).toBeUndefined();
  });

  it("race: concurrent fires leave the latest lastFiredAt; a removed entry is not recreated; an upgrade never overwrites a resume's entry", async () => {
    await Watch.watch({ id, chainId: 31337, trigger: small } as never, 3_000);
    await Promise.all([5, 9, 2, 7, 8, 1].map((at) => Watch.noteFired(id, at * 1000)));
    expect(await raw(entryKey)).toMatchObject({ lastFiredAt: 9_000 });
    await Watch.unwatch(id);
    await Watch.noteFired(id, 10_000);
    expect(await raw(entryKey)).toBeUndefined();

    // An entry of version 2 (no owner) read by the watcher, while a resume writes a new entry (another since).
    await runtime.db.send(
      new PutCommand({
        TableName: runtime.config.tableName,
        Item: {
          ...entryKey,
          gsi2pk: "CHAIN#31337#WATCH",
          gsi2sk: id,
          type: "watch",
          v: 2,
          workflowId: id,
          chainId: 31337,
          since: 4_000,
          trigger: JSON.stringify(small),
        },
      }),
    );
    await runtime.db.send(
      new PutCommand({
        TableName: runtime.config.tableName,
        Item: { pk: `WF#${id}`, sk: "WORKFLOW", type: "workflow", v: 2, id, owner: "0xAbC0000000000000000000000000000000000001" },
      }),
    );
    const [old] = (await Watch.watchersOf(31337)).filter((e) => e.workflowId === id);
    await Watch.watch({ id, chainId: 31337, owner: "0xAbC0000000000000000000000000000000000001", trigger: small } as never, 5_000);
    expect(await Watch.upgrade(old!)).toEqual(old);
    expect(await raw(entryKey)).toMatchObject({ since: 5_000, v: 3 });
    await Watch.unwatch(id);
  });
});

describe("fire record (pattern 17) and claim intent (pattern 22)", () => {
  const execution = {
    pk: "WF#W1#EXEC",
    sk: "01JEXEC0000000000000000001",
    type: "execution",
    v: 1,
    id: "01JEXEC0000000000000000001",
    status: "pending",
  };
  const stored = (fireId?: string) => ({
    key: intentKey({ fireId, executionId: execution.id }),
    isFire: fireId !== undefined,
    workflowId: "W1",
    executionId: execution.id,
    claimedAt: 1_700_000_000_000,
    execution,
    expiresAt: 1_700_086_400,
  });
  const inFlight = { gsi3pk: expect.stringMatching(/^CLAIM#inflight#[0-7]$/), gsi3sk: `001700000000000#${execution.id}` };
  const common = { workflowId: "W1", executionId: execution.id, claimedAt: 1_700_000_000_000, execution, expiresAt: 1_700_086_400 };

  it("writes the items the claim wrote, lists them in flight, and closes them as it did", async () => {
    expect(await putIntent(stored())).toBe(true);
    const claimKey = { pk: `CLAIM#${execution.id}`, sk: "CLAIM" };
    expect(await raw(claimKey)).toEqual({ ...claimKey, ...inFlight, type: "claim", v: 1, ...common });
    expect(await putIntent(stored("F1"))).toBe(true);
    const fireKey = { pk: "FIRE#F1", sk: "FIRE" };
    expect(await raw(fireKey)).toEqual({ ...fireKey, ...inFlight, type: "fire", v: 1, ...common });
    const listed = await intentsInFlightBefore(1_700_000_000_001, 10);
    expect(listed.map((i) => i.key)).toEqual(expect.arrayContaining([claimKey, fireKey]));
    expect(listed.find((i) => i.isFire)).toEqual({ ...stored("F1"), key: fireKey });
    expect(await intentsInFlightBefore(1_700_000_000_000, 10)).toEqual([]);

    expect(await closedMarkers([markerOf(claimKey), markerOf(fireKey)])).toEqual([]);
    await closeIntent(claimKey);
    await closeIntent(fireKey);
    expect(await raw(claimKey)).toBeUndefined();
    expect(await raw(fireKey)).toEqual({
      ...fireKey,
      type: "fire",
      v: 1,
      workflowId: "W1",
      executionId: execution.id,
      claimedAt: 1_700_000_000_000,
      expiresAt: 1_700_086_400,
    });
    expect(await closedMarkers([markerOf(claimKey), markerOf(fireKey)])).toEqual([`claim#CLAIM#${execution.id}`, "claim#FIRE#F1"]);

    expect(await executionWritten("W1", execution.id)).toBe(false);
    await putClaimedExecution({ ...execution, index: 3 });
    await putClaimedExecution({ ...execution, index: 4 }); // written already: a no-op
    expect(await raw({ pk: execution.pk, sk: execution.sk })).toEqual({ ...execution, index: 3 });
    expect(await executionWritten("W1", execution.id)).toBe(true);
  });

  it("an intent written before gsi3 held the due keys (on gsi2) is listed in flight, open, and closed off both", async () => {
    const fireKey = { pk: "FIRE#F-OLD", sk: "FIRE" };
    const { gsi3pk, gsi3sk } = Keys.claimInFlight(1_600_000_000_000, execution.id);
    const old = { ...fireKey, gsi2pk: gsi3pk, gsi2sk: gsi3sk, type: "fire", v: 1, ...common, claimedAt: 1_600_000_000_000 };
    await runtime.db.send(new PutCommand({ TableName: runtime.config.tableName, Item: old }));
    expect((await intentsInFlightBefore(1_600_000_000_001, 10)).map((i) => i.key)).toContainEqual(fireKey);
    expect(await closedMarkers([markerOf(fireKey)])).toEqual([]);
    await closeIntent(fireKey);
    expect(await raw(fireKey)).not.toHaveProperty("gsi2pk");
    expect(await closedMarkers([markerOf(fireKey)])).toEqual([markerOf(fireKey)]);
    expect((await intentsInFlightBefore(1_600_000_000_001, 10)).map((i) => i.key)).not.toContainEqual(fireKey);
  });

  it("race: one fire id is claimed once however many deliveries race", async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => putIntent(stored("F2"))));
    expect(results.filter(Boolean)).toHaveLength(1);
  });
});

describe("workflow record (patterns 10-12)", () => {
  const id = "01JWORKFLOW000000000000001";
  const owner = "0xAbC0000000000000000000000000000000000001";
  const wallet = "0xDeF0000000000000000000000000000000000002";
  /** The record's scalar attributes, stored as they are. */
  const counts = {
    status: "enabled",
    maxExecution: 2,
    executionCount: 0,
    createdAt: 1_000,
    updatedAt: 1_000,
    consecutiveErrors: 0,
    holdsSlot: true,
  };
  const record = {
    id,
    owner,
    name: "n",
    smartWalletAddress: wallet,
    chainId: 31337,
    trigger: { id: "t", name: "t", type: "manual", config: {} },
    nodes: [],
    edges: [],
    inputVariables: { a: 1 },
    ...counts,
  } as unknown as WorkflowRecord;

  it("writes the items create wrote (the record: keys, owner and wallet lists, type, v 3; the definition: the document as text); reads them back", async () => {
    const { attributes, document } = toItem(record);
    await transact([createItem(id, owner, wallet, attributes), createDefinitionItem(id, document)]);
    expect(await raw({ pk: `WF#${id}`, sk: "WORKFLOW" })).toEqual({
      pk: `WF#${id}`,
      sk: "WORKFLOW",
      gsi1pk: "OWNER#0xabc0000000000000000000000000000000000001#WF",
      gsi1sk: id,
      gsi3pk: "OWNER#0xabc0000000000000000000000000000000000001#WALLET#0xdef0000000000000000000000000000000000002#WF",
      gsi3sk: id,
      type: "workflow",
      v: 3,
      id,
      owner,
      smartWalletAddress: wallet,
      chainId: 31337,
      ...counts,
    });
    expect(await raw({ pk: `WF#${id}`, sk: "DEFINITION" })).toEqual({
      pk: `WF#${id}`,
      sk: "DEFINITION",
      type: "workflowDefinition",
      v: 1,
      workflowId: id,
      document: JSON.stringify({ name: "n", trigger: record.trigger, nodes: [], edges: [], inputVariables: { a: 1 } }),
    });
    expect(await read(id)).toMatchObject(record);
    expect((await readDefinitions([id])).get(id)).toBe(document);
    await expect(transact([createItem(id, owner, wallet, attributes)])).rejects.toMatchObject({ name: "TransactionCanceledException" });
  });

  it("race: of a pause, a failure, a completion and a delete racing on one slot-holding record, exactly one lands", async () => {
    await runtime.db.send(
      new PutCommand({
        TableName: runtime.config.tableName,
        Item: {
          pk: `WF#${id}`,
          sk: "WORKFLOW",
          type: "workflow",
          v: 2,
          ...withDocument({ ...record, executionCount: 2, consecutiveErrors: 10 }),
        },
      }),
    );
    const writes = [
      pauseItem(id, true, 5_000),
      failItem(id, true, 5_000, 10),
      completeItem(id, true, { reason: "MAX_EXECUTIONS_REACHED", cause: "atCap", now: 5_000 }),
      deleteItem(id, true),
    ];
    const landed = await Promise.all(
      writes.map((w) =>
        transact([w]).then(
          () => true,
          () => false,
        ),
      ),
    );
    expect(landed.filter(Boolean)).toHaveLength(1);
  });

  it("race: an expired slot-holder's slot is given back once however many creates at the cap release it", async () => {
    const other = "01JWORKFLOW000000000000002";
    await runtime.db.send(
      new PutCommand({
        TableName: runtime.config.tableName,
        Item: {
          pk: `WF#${other}`,
          sk: "WORKFLOW",
          ...{ gsi1pk: "OWNER#0xabc0000000000000000000000000000000000001#WF", gsi1sk: other },
          type: "workflow",
          v: 2,
          ...withDocument({ ...record, id: other, expiredAt: 2_000 }),
        },
      }),
    );
    await transact([incrementBelow(owner, "activeWorkflows", 10)]);
    const holders: string[] = [];
    for await (const ids of expiredSlotHolders(owner, 3_000)) holders.push(...ids);
    expect(holders).toEqual([other]);
    const released = await Promise.all(
      Array.from({ length: 5 }, () =>
        transact([releaseExpiredSlotItem(other, 3_000), decrement(owner, "activeWorkflows")]).then(
          () => true,
          () => false,
        ),
      ),
    );
    expect(released.filter(Boolean)).toHaveLength(1);
    expect(await raw({ pk: "OWNER#0xabc0000000000000000000000000000000000001", sk: "COUNTER#activeWorkflows" })).toMatchObject({
      count: 0,
    });
    expect(await raw({ pk: `WF#${other}`, sk: "WORKFLOW" })).toMatchObject({ holdsSlot: false });
  });
});
