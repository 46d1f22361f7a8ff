/**
 * Records inserted directly into the table for tests of features whose own API comes later
 * (the workflows API: until it exists, a secret test needs a workflow item that belongs to an owner).
 */
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { getAddress } from "viem";
import { ulid } from "ulid";
import { useRuntime } from "../../shared/runtime";
import { Keys } from "../../shared/store/keys";

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
