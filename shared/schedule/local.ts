/**
 * The local scheduler adapter: one item per time-triggered workflow holding its next fire (store pattern 16:
 * `pk = WF#<id>`, `sk = SCHEDULE`; due ones on gsi2 `SCHEDULE#due` ordered by `<nextFireAt padded>#<id>`).
 * A loop (`start`) reads what is due, fires it through `fireTimeTrigger` and advances `nextFireAt`, so a restart
 * (a new process on the same table) resumes exactly where the last one stopped: a fire claimed before a crash and
 * delivered again is a duplicate; one missed during the outage runs late when at most `missed_fire_grace_ms` old.
 *
 * Advancing is conditional on the `nextFireAt` that was read, so two loops on one table (or a pause racing a
 * fire) never resurrect or skip an item; the next instant is computed after `max(instant, now − grace)`, so a long
 * outage jumps over the fires it would skip instead of walking them.
 */
import { DeleteCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { log } from "../log";
import { Index, isConditionFailure } from "../store/table";
import type { WorkflowRecord } from "../workflow/workflow";
import type { Scheduler } from "./port";
import { fireTimeTrigger, upcomingFires, type FireResult } from "./fire";
import * as Workflow from "../workflow/workflow";

const DUE = "SCHEDULE#due";
/** Store pattern 16 (to move into shared/store/keys.ts beside the other builders). */
export const scheduleKey = (workflowId: string) => ({ pk: `WF#${workflowId}`, sk: "SCHEDULE" });
const dueKey = (nextFireAt: number, workflowId: string) => ({ gsi2pk: DUE, gsi2sk: `${String(nextFireAt).padStart(15, "0")}#${workflowId}` });

const LOOP_MS = 1_000;
const BATCH = 25;

export interface LocalScheduler extends Scheduler {
  /** Fires everything due at `now` once; answers what each fire did. */
  tick(now: number): Promise<{ workflowId: string; instant: number; result: FireResult }[]>;
  /** The earliest due instant, if any. */
  nextDueAt(): Promise<number | undefined>;
  /** Runs `tick` every second on the runtime clock until `stop`. */
  start(): void;
  stop(): Promise<void>;
}

export function createLocalScheduler(): LocalScheduler {
  const table = () => useRuntime().config.tableName;
  const db = () => useRuntime().db;

  async function ensure(workflow: WorkflowRecord, now: number) {
    const [next] = upcomingFires(workflow.trigger, workflow, now, 1);
    if (next === undefined) return remove(workflow.id);
    await db().send(
      new PutCommand({
        TableName: table(),
        Item: { ...scheduleKey(workflow.id), ...dueKey(next, workflow.id), type: "schedule", v: 1, workflowId: workflow.id, triggerId: workflow.trigger.id, nextFireAt: next },
      }),
    );
  }

  async function remove(workflowId: string) {
    await db().send(new DeleteCommand({ TableName: table(), Key: scheduleKey(workflowId) }));
  }

  async function due(now: number, limit: number) {
    const out = await db().send(
      new QueryCommand({
        TableName: table(),
        IndexName: Index.gsi2,
        KeyConditionExpression: "gsi2pk = :pk AND gsi2sk <= :upTo",
        ExpressionAttributeValues: { ":pk": DUE, ":upTo": `${String(now).padStart(15, "0")}#~` },
        Limit: limit,
      }),
    );
    return (out.Items ?? []) as { workflowId: string; triggerId: string; nextFireAt: number }[];
  }

  /** Moves the item from `instant` to the next fire (or removes it when there is none or the workflow is done). */
  async function advance(workflowId: string, instant: number, now: number, stop: boolean) {
    const workflow = stop ? undefined : await Workflow.getForRun(workflowId);
    const after = Math.max(instant, now - useRuntime().config.limits.missedFireGraceMs);
    const [next] = workflow ? upcomingFires(workflow.trigger, workflow, after, 1) : [];
    try {
      if (next === undefined) {
        await db().send(
          new DeleteCommand({ TableName: table(), Key: scheduleKey(workflowId), ConditionExpression: "nextFireAt = :at", ExpressionAttributeValues: { ":at": instant } }),
        );
      } else {
        const k = dueKey(next, workflowId);
        await db().send(
          new UpdateCommand({
            TableName: table(),
            Key: scheduleKey(workflowId),
            UpdateExpression: "SET nextFireAt = :next, gsi2sk = :sk",
            ConditionExpression: "nextFireAt = :at",
            ExpressionAttributeValues: { ":next": next, ":sk": k.gsi2sk, ":at": instant },
          }),
        );
      }
    } catch (err) {
      if (!isConditionFailure(err)) throw err; // another loop advanced it, or a pause removed it
    }
  }

  async function tick(now: number) {
    const fired: { workflowId: string; instant: number; result: FireResult }[] = [];
    for (;;) {
      const items = await due(now, BATCH);
      if (items.length === 0) return fired;
      for (const item of items) {
        const instant = Number(item.nextFireAt);
        const result = await fireTimeTrigger({ workflowId: item.workflowId, triggerId: item.triggerId, instant, now });
        fired.push({ workflowId: item.workflowId, instant, result });
        await advance(item.workflowId, instant, now, result.outcome === "skipped" && result.stop);
      }
    }
  }

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  return {
    ensure,
    remove,
    tick,
    async nextDueAt() {
      const out = await db().send(
        new QueryCommand({ TableName: table(), IndexName: Index.gsi2, KeyConditionExpression: "gsi2pk = :pk", ExpressionAttributeValues: { ":pk": DUE }, Limit: 1 }),
      );
      const item = out.Items?.[0];
      return item ? Number(item.nextFireAt) : undefined;
    },
    start() {
      if (timer) return;
      timer = setInterval(() => {
        if (running) return; // a slow tick is not stacked on
        running = tick(useRuntime().now())
          .catch((err) => log.warn("scheduler tick failed", { error: (err as Error).message }))
          .finally(() => (running = undefined));
      }, LOOP_MS);
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}
