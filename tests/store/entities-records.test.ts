/**
 * Items written through the entities (shared/store/entities/) are the items the hand-written commands wrote
 * before (issue 18 item 3): each record type's writes, read back raw from the table, equal a literal item.
 * The race tests of each entity's conditional invariants live beside its domain tests (named per entity below).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { createRuntime, setRuntime, useRuntime, type Runtime } from "../../shared/runtime";
import { Keys } from "../../shared/store/keys";
import { useTestRuntime } from "../support/runtime";
import { RateLimiter } from "../../shared/http/rate-limit";

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

// Race: tests/rate-limit.test.ts "concurrent requests through two instances never allow more than the burst".
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
