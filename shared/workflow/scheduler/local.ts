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
 *
 * Fairness across owners (API.md §18.4): a tick reads everything due (up to `DUE_PER_ROUND`), orders it owner by
 * owner in turn (each owner's fires in due order; items carry the workflow's owner) and claims up to `PARALLEL`
 * fires at once. Two hundred of one owner's workflows on one instant therefore delay another owner's fire on that
 * instant by about one claim, not two hundred; its run then waits only for its owner's turn in the run queue
 * (shared/execution/run-queue.ts).
 */
import { log } from "../../log";
import {
  advanceSchedule,
  dropSchedule,
  dueSchedules,
  earliestSchedule,
  putSchedule,
  removeSchedule,
  type ScheduleEntry,
} from "../../store/entities/schedule";
import { upcomingFires, type FireResult, type FireTimeTrigger, type Scheduler } from "./scheduler";
import { useRuntime } from "../../current-runtime";
import type { WorkflowRecord } from "../record";
import { getForRun } from "../stored";

/** Store pattern 16 (tests read items by it). */

const LOOP_MS = 1_000;
/** Due items read per round of a tick (one Query; items are ~200 bytes). */
const DUE_PER_ROUND = 1_000;
/** Fires claimed at once within a round. */
const PARALLEL = 8;

type DueItem = ScheduleEntry;

/** Due items owner by owner in turn (each owner's in due order); items written before `owner` count as their own owner. */
export function interleaveByOwner<T extends { workflowId: string; owner?: string }>(items: T[]): T[] {
  const byOwner = new Map<string, T[]>();
  for (const item of items) {
    const key = item.owner?.toLowerCase() ?? `workflow:${item.workflowId}`;
    const list = byOwner.get(key);
    if (list) list.push(item);
    else byOwner.set(key, [item]);
  }
  const lists = [...byOwner.values()];
  const out: T[] = [];
  for (let round = 0; out.length < items.length; round++) {
    for (const list of lists) if (round < list.length) out.push(list[round]!);
  }
  return out;
}

export interface LocalScheduler extends Scheduler {
  /** Fires everything due at `now` once; answers what each fire did. */
  tick(now: number): Promise<{ workflowId: string; instant: number; result: FireResult }[]>;
  /** The earliest due instant, if any. */
  nextDueAt(): Promise<number | undefined>;
  /** Runs `tick` every second on the runtime clock until `stop`. */
  start(): void;
  stop(): Promise<void>;
}

/** The local adapter; `fire` is what a due fire is handed to (the host passes shared/execution/time-fire.ts). */
export function createLocalScheduler(fire: FireTimeTrigger): LocalScheduler {
  async function ensure(workflow: WorkflowRecord, now: number) {
    const [next] = upcomingFires(workflow.trigger, workflow, now, 1);
    if (next === undefined) return remove(workflow.id);
    await putSchedule({ workflowId: workflow.id, owner: workflow.owner, triggerId: workflow.trigger.id, nextFireAt: next });
  }

  const remove = removeSchedule;
  const due = dueSchedules;

  /** Moves the item from `instant` to the next fire (or removes it when there is none or the workflow is done). */
  async function advance(workflowId: string, instant: number, now: number, stop: boolean) {
    const workflow = stop ? undefined : await getForRun(workflowId);
    const after = Math.max(instant, now - useRuntime().config.limits.missedFireGraceMs);
    const [next] = workflow ? upcomingFires(workflow.trigger, workflow, after, 1) : [];
    // False when another loop advanced it, or a pause removed it: nothing to do.
    if (next === undefined) await dropSchedule(workflowId, instant);
    else await advanceSchedule(workflowId, instant, next, workflow!.owner);
  }

  async function fireOne(item: DueItem, now: number) {
    const instant = Number(item.nextFireAt);
    const result = await fire({ workflowId: item.workflowId, triggerId: item.triggerId, instant, now });
    await advance(item.workflowId, instant, now, result.outcome === "skipped" && result.stop);
    return { workflowId: item.workflowId, instant, result };
  }

  /** One round: what is due, owner by owner in turn, `PARALLEL` at a time; answers in that order. */
  async function round(items: DueItem[], now: number) {
    const ordered = interleaveByOwner(items);
    const results: ({ workflowId: string; instant: number; result: FireResult } | undefined)[] = new Array(ordered.length);
    let failure: unknown;
    let next = 0;
    const worker = async () => {
      while (next < ordered.length && failure === undefined) {
        const at = next++;
        try {
          results[at] = await fireOne(ordered[at]!, now);
        } catch (err) {
          failure ??= err; // stops this tick (the item stays due); the next tick tries again
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, ordered.length) }, worker));
    if (failure !== undefined) throw failure;
    return results.filter((r) => r !== undefined);
  }

  async function tick(now: number) {
    const fired: { workflowId: string; instant: number; result: FireResult }[] = [];
    for (;;) {
      const items = await due(now, DUE_PER_ROUND);
      if (items.length === 0) return fired;
      fired.push(...(await round(items, now)));
    }
  }

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  return {
    ensure,
    remove,
    tick,
    nextDueAt: earliestSchedule,
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
