/**
 * Items written through the entities (shared/store/entities/) are the items the hand-written commands wrote
 * before (issue 18 item 3): each record type's writes, read back raw from the table, equal a literal item.
 * The race tests of each entity's conditional invariants live beside its domain tests (named per entity below).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { createRuntime } from "../../shared/runtime";
import { Keys } from "../../shared/store/item-keys";
import { useTestRuntime } from "../support/runtime";
import { RateLimiter } from "../../shared/http/rate-limit";
import { claimSlot, liveSlots } from "../../shared/execution/stream-slots";
import { freeSlot, renewSlot } from "../../shared/store/entities/stream-slot";
import { createWallet, getWallet, setHidden, walletsOn, type WalletItem } from "../../shared/store/entities/wallet";
import { record, settle } from "../../shared/wallet/withdraw-records";
import { pendingWithdrawals, touchWithdrawal } from "../../shared/store/entities/withdrawal";
import { reserveSponsoredGas } from "../../shared/wallet/sponsorship";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { readRunInput, runInputStorage } from "../../shared/execution/run-input";
import { sweep } from "../../shared/execution/execution-sweep";
import { lostRuns, markRunStarted, pendingBefore } from "../../shared/store/entities/execution";
import { CHAIN_ID, FEE, VALUE_FEE, triggerStep } from "../support/fixtures";
import { createSecret, deleteSecret, readSecrets, replaceSecret } from "../../shared/store/entities/secret";
import { setRuntime, useRuntime, type Runtime } from "../../shared/current-runtime";
import { pendingItem, recordStep, finish } from "../../shared/execution/execution-write";
import { getRecord, readSummary } from "../../shared/execution/execution-read";

let rt: Runtime;

beforeAll(async () => {
  rt = await useTestRuntime();
});

/** The raw item at `key` (strongly consistent). */
async function raw(key: { pk: string; sk: string }) {
  const out = await useRuntime().db.send(new GetCommand({ TableName: useRuntime().config.tableName, Key: key, ConsistentRead: true }));
  return out.Item;
}

/** The file's runtime with a fixed clock (ms) and other limits. */
function at(clock: number, limits: Partial<Runtime["config"]["limits"]> = {}): Runtime {
  return setRuntime(createRuntime({ config: { ...rt.config, limits: { ...rt.config.limits, ...limits } }, now: () => clock }));
}

// Race: tests/http/rate-limit.test.ts "concurrent requests through two instances never allow more than the burst".
describe("rate-limit bucket", () => {
  it("writes the item the hand-written UpdateItem wrote (reset, then advance)", async () => {
    const clock = 1_750_000_000_250;
    at(clock, { rateLimitBurst: 4, rateLimitRps: 2 });
    const limiter = new RateLimiter();
    expect((await limiter.take("sub:0xentity"))?.allowed).toBe(true);
    expect(await raw(Keys.rateLimit("sub:0xentity"))).toEqual({
      pk: "RATE#sub:0xentity",
      sk: "RATE",
      type: "rateLimit",
      v: 1,
      tat: clock * 1000 + 500_000,
      expiresAt: Math.ceil((clock * 1000 + 4 * 500_000) / 1_000_000) + 1,
    });
    expect((await limiter.take("sub:0xentity"))?.allowed).toBe(true);
    expect((await raw(Keys.rateLimit("sub:0xentity")))?.tat).toBe(clock * 1000 + 1_000_000);
    // A fresh instance guesses "reset" and is refused: the stored tat comes back with the failure.
    expect((await new RateLimiter().take("sub:0xentity"))?.remaining).toBe(1);
    expect((await raw(Keys.rateLimit("sub:0xentity")))?.tat).toBe(clock * 1000 + 1_500_000);
    setRuntime(rt);
  });
});

// Race (the cap): tests/execution/stream-slots.test.ts "shares the 20 across two service processes ... concurrent opens".
describe("stream slot", () => {
  const owner = "0x00000000000000000000000000000000000000Aa";

  it("writes the lease item the hand-written PutItem and UpdateItem wrote, and deletes only its own", async () => {
    const now = 1_750_000_000_000;
    expect(await claimSlot(owner, 3, "S1", now, 45_000)).toBe(true);
    const key = Keys.streamSlot(owner, 3);
    expect(await raw(key)).toEqual({
      pk: "OWNER#0x00000000000000000000000000000000000000aa",
      sk: "STREAMSLOT#0003",
      type: "streamSlot",
      v: 1,
      streamId: "S1",
      leaseUntil: now + 45_000,
      expiresAt: Math.ceil((now + 45_000) / 1000) + 3600,
    });
    expect(await renewSlot(owner, 3, { streamId: "S1", leaseUntil: now + 60_000, expiresAt: 42 })).toBe(true);
    expect(await raw(key)).toMatchObject({ leaseUntil: now + 60_000, expiresAt: 42, streamId: "S1" });
    expect(await renewSlot(owner, 3, { streamId: "S2", leaseUntil: 0, expiresAt: 0 })).toBe(false);
    expect([...(await liveSlots(owner, now))]).toEqual([[3, "S1"]]);
    expect(await freeSlot(owner, 3, "S2")).toBe(false);
    expect(await freeSlot(owner, 3, "S1")).toBe(true);
    expect(await raw(key)).toBeUndefined();
  });

  it("lets exactly one of concurrent claims of one free slot hold it, and takes an expired lease over", async () => {
    const now = 1_750_000_100_000;
    const won = await Promise.all(Array.from({ length: 12 }, (_, i) => claimSlot(owner, 7, `R${i}`, now, 1_000)));
    expect(won.filter(Boolean)).toHaveLength(1);
    const later = await Promise.all(Array.from({ length: 12 }, (_, i) => claimSlot(owner, 7, `L${i}`, now + 1_000, 1_000)));
    expect(later.filter(Boolean)).toHaveLength(1);
  });
});

// Races (the cap): tests/secret/secrets.test.ts "10 concurrent creates never exceed the cap" and "concurrent creates,
// replaces and deletes of the same names keep the counter exact".
describe("secret", () => {
  const owner = "0x00000000000000000000000000000000000000Bb";
  const wf = "01JAAAAAAAAAAAAAAAAAAAAAAA";
  const sealed = { encryptedKey: "ek", iv: "iv", ciphertext: "ct", tag: "tg", keyId: "arn:key" };

  it("writes the items the hand-written transaction and UpdateItem wrote, and counts them", async () => {
    const id = { owner, name: "API_KEY", workflowId: wf };
    expect(await createSecret(id, { at: 1000, scope: "workflow", sealed }, 3)).toBe("created");
    const expected = {
      pk: "OWNER#0x00000000000000000000000000000000000000bb",
      sk: `SECRET#API_KEY#1#${wf}`,
      gsi1pk: `OWNER#0x00000000000000000000000000000000000000bb#WF#${wf}#SECRETS`,
      gsi1sk: `SECRET#API_KEY#1#${wf}`,
      type: "secret",
      v: 1,
      owner: owner.toLowerCase(),
      name: "API_KEY",
      scope: "workflow",
      workflowId: wf,
      createdAt: 1000,
      updatedAt: 1000,
      ...sealed,
    };
    expect(await raw(Keys.secret(owner, "API_KEY", wf))).toEqual(expected);
    const counter = Keys.counter(owner, "secrets");
    expect(await raw(counter)).toEqual({ ...counter, count: 1, type: "counter", v: 1 });

    expect(await createSecret(id, { at: 2000, scope: "workflow", sealed }, 3)).toBe("exists");
    const next = { encryptedKey: "ek2", iv: "iv2", ciphertext: "ct2", tag: "tg2", keyId: "arn:key2" };
    expect(await replaceSecret(id, 2000, next)).toBe("replaced");
    expect(await raw(Keys.secret(owner, "API_KEY", wf))).toEqual({ ...expected, ...next, updatedAt: 2000 });
    expect(await replaceSecret({ owner, name: "API_KEY" }, 2000, next)).toBe("absent");

    expect(await createSecret({ owner, name: "API_KEY" }, { at: 3000, scope: "user", sealed }, 3)).toBe("created");
    expect(await raw(Keys.secret(owner, "API_KEY"))).toEqual({
      pk: expected.pk,
      sk: "SECRET#API_KEY#0",
      type: "secret",
      v: 1,
      owner: owner.toLowerCase(),
      name: "API_KEY",
      scope: "user",
      createdAt: 3000,
      updatedAt: 3000,
      ...sealed,
    });
    expect(await createSecret({ owner, name: "THIRD" }, { at: 3000, scope: "user", sealed }, 2)).toBe("full");
    const found = await readSecrets([id, { owner, name: "API_KEY" }, { owner, name: "NONE" }], 3, async () => {});
    expect([...found.keys()].sort()).toEqual(["SECRET#API_KEY#0", `SECRET#API_KEY#1#${wf}`]);

    expect(await deleteSecret(id)).toBe("deleted");
    expect(await deleteSecret(id)).toBe("absent");
    expect(await raw(counter)).toMatchObject({ count: 1 });
  });
});

// Race (the cap): tests/wallet/wallets.test.ts "holds the cap under 20 concurrent creates".
describe("wallet", () => {
  const owner = "0x00000000000000000000000000000000000000Cc";
  const address = "0x000000000000000000000000000000000000dEaD";
  const record: WalletItem = {
    owner,
    chainId: 31337,
    address,
    salt: "7",
    factoryAddress: "0x0000000000000000000000000000000000000Fac",
    isHidden: false,
    createdAt: 1000,
  };

  it("writes the item the hand-written transaction wrote, counts it per chain, and hides it", async () => {
    expect(await createWallet(record, 2)).toBe("created");
    const key = Keys.wallet(owner, 31337, address);
    const expected = {
      pk: "OWNER#0x00000000000000000000000000000000000000cc",
      sk: "WALLET#31337#0x000000000000000000000000000000000000dead",
      type: "wallet",
      v: 1,
      ...record,
    };
    expect(await raw(key)).toEqual(expected);
    expect(await raw(Keys.counter(owner, "wallets#31337"))).toMatchObject({ count: 1 });
    expect(await createWallet(record, 2)).toBe("exists");
    expect(await createWallet({ ...record, address: "0x000000000000000000000000000000000000bEEF" }, 1)).toBe("full");
    expect(await setHidden({ owner, chainId: 31337, address }, true)).toEqual({ ...expected, isHidden: true });
    expect(await getWallet({ owner, chainId: 31337, address })).toEqual({ ...expected, isHidden: true });
    expect(await walletsOn(owner, 31337)).toEqual([{ ...expected, isHidden: true }]);
    await expect(setHidden({ owner, chainId: 1, address }, true)).rejects.toMatchObject({ name: "ConditionalCheckFailedException" });
  });
});

describe("withdrawal", () => {
  const owner = "0x00000000000000000000000000000000000000Dd" as const;
  const wallet = "0x000000000000000000000000000000000000dEaD" as const;
  const stored = (id: string) => ({
    id,
    chainId: 31337,
    status: "pending" as const,
    userOpHash: "0xabc" as const,
    submittedAt: 5000,
    smartWalletAddress: wallet,
    recipientAddress: "0x000000000000000000000000000000000000bEEF" as const,
    amount: "10",
    token: "ETH" as const,
    owner,
  });

  it("writes the item the hand-written PutItem wrote (on the pending index), and settles it off the index", async () => {
    const id = "01JBBBBBBBBBBBBBBBBBBBBBBB";
    await record(stored(id));
    const key = Keys.withdrawal(owner, 31337, wallet, id);
    const expected = {
      pk: "OWNER#0x00000000000000000000000000000000000000dd",
      sk: `WITHDRAWAL#31337#0x000000000000000000000000000000000000dead#${id}`,
      gsi3pk: expect.stringMatching(/^WITHDRAWAL#pending#[0-7]$/),
      gsi3sk: `5000#${id}`,
      type: "withdrawal",
      v: 1,
      ...stored(id),
    };
    expect(await raw(key)).toEqual(expected);
    expect((await pendingWithdrawals(100)).map((w) => w.id)).toContain(id);
    await touchWithdrawal({ owner, chainId: 31337, wallet, id }, 6000);
    expect(await raw(key)).toEqual({ ...expected, lastCheckedAt: 6000 });

    at(7000);
    const settled = await settle(stored(id), { status: "failed", message: "user operation was not included", userOpHash: undefined });
    setRuntime(rt);
    expect(settled).toMatchObject({ status: "failed", message: "user operation was not included" });
    const { gsi3pk: _pk, gsi3sk: _sk, userOpHash: _hash, ...rest } = expected;
    expect(await raw(key)).toEqual({ ...rest, status: "failed", message: "user operation was not included", lastCheckedAt: 7000 });
    expect((await pendingWithdrawals(100)).map((w) => w.id)).not.toContain(id);
  });

  it("takes a settled withdrawal still listed as pending off the index instead of answering it", async () => {
    const id = "01JBBBBBBBBBBBBBBBBBBBBBBC";
    const key = Keys.withdrawal(owner, 31337, wallet, id);
    const stale = { ...key, ...Keys.pendingWithdrawal(5000, id), type: "withdrawal", v: 1, ...stored(id), status: "confirmed" };
    await useRuntime().db.send(new PutCommand({ TableName: rt.config.tableName, Item: stale }));
    expect((await pendingWithdrawals(100)).map((w) => w.id)).not.toContain(id);
    expect(await raw(key)).not.toHaveProperty("gsi3pk");
    expect(await raw(key)).toMatchObject({ status: "confirmed" });
  });

  it("settles a pending withdrawal once under concurrent settles (the first outcome stays)", async () => {
    const id = "01JCCCCCCCCCCCCCCCCCCCCCCC";
    await record(stored(id));
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        settle(stored(id), i % 2 ? { status: "confirmed", transactionHash: `0x${i}` } : { status: "failed", message: `m${i}` }),
      ),
    );
    const final = await raw(Keys.withdrawal(owner, 31337, wallet, id));
    expect(final?.status).not.toBe("pending");
    // Every caller answers the one stored outcome.
    for (const o of outcomes) expect(o.status).toBe(final?.status);
  });
});

// Races (the caps): tests/wallet/sponsorship.test.ts "grants exactly 10 of 20 concurrent reservations ..." and the
// two-client, hour-boundary and chain-shard cases there.
describe("sponsored-gas counter", () => {
  it("writes the item the hand-written UpdateItems wrote: first bucket, growth, pruning, give-back", async () => {
    const owner = "0x00000000000000000000000000000000000000Ee";
    const hour = 480_000;
    const store = (ms: number) => ({ db: rt.db, tableName: rt.config.tableName, now: () => ms });
    const budgets = { perOwner: 10_000, perChain: Infinity };
    const reserve = (gas: bigint, ms: number) => reserveSponsoredGas({ chainId: 7, owner, gas }, { budgets, store: store(ms) });
    const key = Keys.sponsoredGasOwner(7, owner);
    const first = await reserve(1000n, hour * 3_600_000);
    const item = { ...key, type: "sponsoredGas", v: 1, latest: hour, expiresAt: (hour + 25) * 3600 };
    expect(await raw(key)).toEqual({ ...item, hours: { [hour]: 1000 } });
    await reserve(500n, hour * 3_600_000 + 1);
    expect(await raw(key)).toEqual({ ...item, hours: { [hour]: 1500 } });
    await first!.giveBack();
    expect(await raw(key)).toEqual({ ...item, hours: { [hour]: 500 } });
    await reserve(2000n, (hour + 30) * 3_600_000);
    expect(await raw(key)).toEqual({ ...item, latest: hour + 30, expiresAt: (hour + 55) * 3600, hours: { [hour + 30]: 2000 } });
    expect(await reserve(8001n, (hour + 30) * 3_600_000)).toBeUndefined();
  });
});

describe("execution, step and run-input items", () => {
  const owner = "0x00000000000000000000000000000000000000Ff";
  const workflowId = "01JDDDDDDDDDDDDDDDDDDDDDDD";
  const startAt = 1_750_000_000_000;
  const pending = (id: string) =>
    pendingItem({
      workflowId,
      owner,
      chainId: CHAIN_ID,
      id,
      index: 2,
      startAt,
      executionFee: FEE,
      valueFee: VALUE_FEE,
      triggerStep: triggerStep(startAt),
    });
  const insert = (id: string) => useRuntime().db.send(new PutCommand({ TableName: rt.config.tableName, Item: pending(id) }));
  const text = (item: Record<string, unknown> | undefined) => Buffer.from(item?.body as Uint8Array).toString("utf8");
  const withoutBody = (item: Record<string, unknown> | undefined) => {
    const { body: _body, ...rest } = item ?? {};
    return rest;
  };

  it("builds the pending item the claim wrote, and records steps, costs and the end as the hand-written writes did", async () => {
    const id = "01JDEEEEEEEEEEEEEEEEEEEEEE";
    const execution = {
      pk: `WF#${workflowId}#EXEC`,
      sk: id,
      gsi1pk: "OWNER#0x00000000000000000000000000000000000000ff#EXEC",
      gsi1sk: id,
      gsi3pk: expect.stringMatching(/^EXEC#pending#[0-7]$/),
      gsi3sk: `${String(startAt).padStart(15, "0")}#${id}`,
      type: "execution",
      v: 1,
      id,
      workflowId,
      owner,
      chainId: CHAIN_ID,
      index: 2,
      startAt,
      status: "pending",
      executionFee: FEE,
      valueFee: VALUE_FEE,
      cogs: {},
      triggerId: "trigger1",
      triggerStep: JSON.stringify(triggerStep(startAt)),
    };
    expect(pending(id)).toEqual(execution);
    await insert(id);

    at(startAt + 5);
    const step = { ...triggerStep(startAt), id: "node1", type: "customCode", name: "code", output: { data: 1 } } as never;
    const cost = { nodeId: "node1", amount: "1", unit: "wei" } as never;
    expect(await recordStep(workflowId, id, step, cost, 0)).toBe(true);
    const json = JSON.stringify({ position: 0, recordedAt: startAt + 5, step });
    const executionAfterStep = await raw(Keys.execution(workflowId, id));
    expect(executionAfterStep).toEqual({
      ...execution,
      stepIds: new Set(["node1"]),
      stepBytes: Buffer.byteLength(json),
      cogs: { node1: cost },
    });
    const part = await raw(Keys.executionStep(id, "node1", 0));
    expect(withoutBody(part)).toEqual({
      pk: `EXEC#${id}`,
      sk: "STEP#node1#00",
      type: "executionStep",
      v: 2,
      stepId: "node1",
      part: 0,
      parts: 1,
      outputBytes: Buffer.byteLength(JSON.stringify({ data: 1 })),
      outputParts: 0,
    });
    expect(text(part)).toBe(json);

    // A large output: items of its own.
    const big = { data: "x".repeat(5000) };
    const large = { ...triggerStep(startAt), id: "node2", type: "customCode", name: "code2", output: big } as never;
    expect(await recordStep(workflowId, id, large, undefined, 1)).toBe(true);
    const out = await raw(Keys.executionStepOutput(id, "node2", 0));
    expect(withoutBody(out)).toEqual({
      pk: `EXEC#${id}`,
      sk: "OUT#node2#00",
      type: "executionStepOutput",
      v: 2,
      stepId: "node2",
      part: 0,
      parts: 1,
    });
    expect(text(out)).toBe(JSON.stringify(big));
    const largePart = await raw(Keys.executionStep(id, "node2", 0));
    const largeJson = JSON.stringify({ position: 1, recordedAt: startAt + 5, step: { ...(large as object), output: null } });
    expect(text(largePart)).toBe(largeJson);
    expect(withoutBody(largePart)).toMatchObject({ outputBytes: JSON.stringify(big).length, outputParts: 1 });
    const record = await getRecord(workflowId, id);
    expect(record?.execution.steps.map((s) => s.id)).toEqual(["trigger1", "node1", "node2"]);
    expect(record?.execution.steps[2]?.output).toEqual(big);

    const started = await markRunStarted({ workflowId, id }, startAt + 7);
    expect(started).toMatchObject({ runStartedAt: startAt + 7 });
    expect(await markRunStarted({ workflowId, id }, startAt + 8)).toBeUndefined();

    expect(await finish(workflowId, id, { status: "error", error: "boom", endAt: startAt + 9, cogs: [] })).toBe(true);
    const { gsi3pk: _pk, gsi3sk: _sk, ...ended } = execution;
    expect(await raw(Keys.execution(workflowId, id))).toEqual({
      ...ended,
      stepIds: new Set(["node1", "node2"]),
      stepBytes: (executionAfterStep?.stepBytes as number) + Buffer.byteLength(largeJson) + JSON.stringify(big).length,
      runStartedAt: startAt + 7,
      status: "error",
      error: "boom",
      endAt: startAt + 9,
      cogs: {},
    });
    expect(await recordStep(workflowId, id, step, undefined, 0)).toBe(false);
    expect(await readSummary(workflowId, id)).toEqual({
      owner,
      summary: { id, workflowId, status: "error", startAt, endAt: startAt + 9, error: "boom" },
    });
    setRuntime(rt);
  });

  it("ends a pending execution once under concurrent finishes and sweeps; the sweeper reads the pending index", async () => {
    const id = "01JDFFFFFFFFFFFFFFFFFFFFFF";
    await insert(id);
    const swept = sweep(startAt + rt.config.limits.executionTimeoutMs + 1);
    const finishes = Array.from({ length: 8 }, (_, i) => finish(workflowId, id, { status: "success", endAt: startAt + i }));
    const [sweepResult, ...won] = await Promise.all([swept, ...finishes]);
    expect(won.filter(Boolean).length + sweepResult.timedOut.filter((t) => t.id === id).length).toBe(1);
    expect((await raw(Keys.execution(workflowId, id)))?.gsi3pk).toBeUndefined();
  });

  it("a run's last step whose finish is refused (the sweeper ended the run) is never shown", async () => {
    const id = "01JDFFFFFFFFFFFFFFFFFFFFF3";
    await insert(id);
    expect((await sweep(startAt + rt.config.limits.executionTimeoutMs + 1)).timedOut.map((t) => t.id)).toContain(id);
    const last = { ...triggerStep(startAt), id: "late", type: "customCode", name: "code", output: { data: 1 } } as never;
    expect(await finish(workflowId, id, { status: "success", endAt: startAt + 1 }, { step: last, position: 0 })).toBe(false);
    const record = await getRecord(workflowId, id);
    expect(record?.execution.status).toBe("error");
    expect(record?.execution.steps.map((s) => s.id)).not.toContain("late");
  });

  it("reads pending executions from the keys-only gsi3, and those written before it from gsi2; lost runs by key", async () => {
    const [current, legacy] = ["01JDFFFFFFFFFFFFFFFFFFFFF1", "01JDFFFFFFFFFFFFFFFFFFFFF2"];
    const { gsi3pk, gsi3sk, ...old } = pending(legacy);
    await insert(current);
    await useRuntime().db.send(new PutCommand({ TableName: rt.config.tableName, Item: { ...old, gsi2pk: gsi3pk, gsi2sk: gsi3sk } }));
    const ids = async () => (await pendingBefore(startAt + 1, 1_000)).map((e) => e.id);
    expect(await ids()).toEqual(expect.arrayContaining([current, legacy]));
    // Never started by a runner and older than the cutoff: both lost; started: neither.
    const lost = async () => (await lostRuns(startAt, startAt + 1, 1_000)).filter((e) => [current, legacy].includes(e.id));
    expect(await lost()).toEqual(
      expect.arrayContaining([
        { workflowId, id: current, resume: false },
        { workflowId, id: legacy, resume: false },
      ]),
    );
    await markRunStarted({ workflowId, id: current }, startAt + 1);
    await markRunStarted({ workflowId, id: legacy }, startAt + 1);
    expect(await lost()).toEqual([]);
    for (const id of [current, legacy]) expect(await finish(workflowId, id, { status: "success", endAt: startAt + 2 })).toBe(true);
    expect(await ids()).not.toContain(current);
    expect(await ids()).not.toContain(legacy);
    expect(await raw(Keys.execution(workflowId, legacy))).not.toHaveProperty("gsi2pk");
  });

  it("writes a large run input in the parts the hand-written PutItems wrote, reads and discards them", async () => {
    at(startAt);
    const request = { triggerInput: { blob: "y".repeat(400_000) } };
    const storage = await runInputStorage("01JDGGGGGGGGGGGGGGGGGGGGGG", request);
    setRuntime(rt);
    expect(storage.attributes).toEqual({ runInputParts: 2 });
    const first = await raw(Keys.executionInput("01JDGGGGGGGGGGGGGGGGGGGGGG", 0));
    expect(withoutBody(first)).toEqual({
      pk: "EXEC#01JDGGGGGGGGGGGGGGGGGGGGGG",
      sk: "INPUT#00",
      type: "executionInput",
      v: 1,
      part: 0,
      parts: 2,
      expiresAt: Math.floor(startAt / 1000) + Math.ceil(rt.config.limits.executionTimeoutMs / 1000) + 24 * 3600,
    });
    expect(await readRunInput("01JDGGGGGGGGGGGGGGGGGGGGGG", { runInputParts: 2 })).toEqual(request);
    await storage.discard();
    expect(await raw(Keys.executionInput("01JDGGGGGGGGGGGGGGGGGGGGGG", 1))).toBeUndefined();
  });

  it("keeps a run input on the execution item up to 1 KB only: a larger one would be rewritten by every write of the execution", async () => {
    const small = { triggerInput: { blob: "y".repeat(900) } };
    expect((await runInputStorage("01JDHHHHHHHHHHHHHHHHHHHHHH", small)).attributes).toEqual({ runInput: JSON.stringify(small) });
    const larger = await runInputStorage("01JDHHHHHHHHHHHHHHHHHHHHHH", { triggerInput: { blob: "y".repeat(1_100) } });
    expect(larger.attributes).toEqual({ runInputParts: 1 });
    await larger.discard();
  });
});
