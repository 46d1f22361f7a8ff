/** The sweeper (API.md §10.3): ends the executions still pending past `execution_timeout_ms`. */
import { QueryCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { Index } from "../store/table";
import { finish } from "./execution-write";
import { table } from "./execution-stored";

/**
 * Ends every execution still pending `execution_timeout_ms` after its start with `error` "execution timed out"
 * (API.md §10.3). The run, if alive, starts no further node: its shouldStop sees the execution terminal.
 */
export async function sweep(
  now = useRuntime().now(),
  max = 100,
): Promise<{ checked: number; timedOut: { workflowId: string; id: string }[] }> {
  const { db, config } = useRuntime();
  const { gsi2pk, gsi2sk: cutoff } = Keys.pendingExecution(now - config.limits.executionTimeoutMs, "");
  const out = await db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: Index.gsi2,
      KeyConditionExpression: "gsi2pk = :pk AND gsi2sk < :cutoff",
      ExpressionAttributeValues: { ":pk": gsi2pk, ":cutoff": cutoff },
      ProjectionExpression: "workflowId, id",
      Limit: max,
    }),
  );
  const timedOut: { workflowId: string; id: string }[] = [];
  for (const item of (out.Items ?? []) as { workflowId: string; id: string }[]) {
    if (await finish(item.workflowId, item.id, { status: "error", error: "execution timed out", endAt: now })) timedOut.push(item);
  }
  return { checked: out.Items?.length ?? 0, timedOut };
}
