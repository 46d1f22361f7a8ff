/**
 * The workflow side's entities (shared/store/entities/): each writes the items the code before it wrote, attribute
 * for attribute (literal items, read back raw), and keeps the conditional invariants it owns under races.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import type { Runtime } from "../../shared/runtime";
import { transact } from "../../shared/store/entity";
import { dueExpiries, forgetExpiry, putExpiry } from "../../shared/store/entities/expiry";

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
      gsi2pk: "EXPIRY#due",
      gsi2sk: `001700000000000#${id}`,
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
});
