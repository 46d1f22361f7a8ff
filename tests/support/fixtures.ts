/**
 * Records inserted directly into the table for tests of features whose own API comes later or is not what the
 * test is about: a minimal workflow item that belongs to an owner (a secret test needs one), and a pending
 * execution written as the claim writes it (tests of what reads, lists and streams answer, no run behind it).
 */
import { randomBytes } from "node:crypto";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { getAddress, type Address } from "viem";
import { ulid } from "ulid";
import { Keys } from "../../shared/store/item-keys";
import { issueToken } from "../../shared/http/token";
import { useRuntime } from "../../shared/current-runtime";
import { pendingItem } from "../../shared/execution/execution-write";
import type { Step } from "../../shared/engine/schemas";

/** Inserts a minimal workflow item owned by `owner`; returns its id (a new ULID unless given). */
export async function insertWorkflow(owner: string, id: string = ulid()): Promise<string> {
  const { db, config, now } = useRuntime();
  const at = now();
  await db.send(
    new PutCommand({
      TableName: config.tableName,
      Item: { ...Keys.workflow(id), type: "workflow", v: 1, id, owner: getAddress(owner), status: "enabled", createdAt: at, updatedAt: at },
    }),
  );
  return id;
}

export const CHAIN_ID = 31337;
/** The fees a pending execution is written with. */
export const FEE = { amount: "0.02", unit: "USD" as const };
export const VALUE_FEE = {
  fee: { amount: "0", unit: "PERCENTAGE" as const },
  tier: "unspecified" as const,
  classificationMethod: "ruleBased" as const,
  confidence: 1,
  reason: "workflow contains no on-chain value-moving nodes",
};

/** A new owner address nobody has signed in with. */
export const randomOwner = (): Address => getAddress(`0x${randomBytes(20).toString("hex")}`);

/** The manual trigger step a claim records (`data` the trigger's data). */
export const triggerStep = (startAt: number, data: unknown = { hello: "world" }): Step => ({
  id: "trigger1",
  type: "manual",
  name: "manualTrigger",
  success: true,
  config: { data },
  output: { data, headers: {}, pathParams: {} },
  startAt,
  endAt: startAt,
});

/**
 * Puts a pending execution of `workflowId` started at `startAt` as the claim writes it (its item, trigger step
 * inside, one conditional put, on the current runtime's table); answers its id, `ulid(startAt)`.
 */
export async function insertPending(owner: Address, workflowId: string, startAt: number, index = 0): Promise<string> {
  const { db, config } = useRuntime();
  const id = ulid(startAt);
  const item = pendingItem({
    workflowId,
    owner,
    chainId: CHAIN_ID,
    id,
    index,
    startAt,
    executionFee: FEE,
    valueFee: VALUE_FEE,
    triggerStep: triggerStep(startAt),
  });
  await db.send(new PutCommand({ TableName: config.tableName, Item: item, ConditionExpression: "attribute_not_exists(pk)" }));
  return id;
}

const tokens = new Map<string, string>();
/** `Authorization: Bearer` for `owner` on the default chain (one token per owner, valid a day). */
export async function bearer(owner: Address): Promise<{ Authorization: string }> {
  let token = tokens.get(owner);
  if (!token) {
    token = await issueToken(owner, CHAIN_ID, Date.now() + 24 * 3600_000);
    tokens.set(owner, token);
  }
  return { Authorization: `Bearer ${token}` };
}
