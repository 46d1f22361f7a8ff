/**
 * Recovery of resumed runs whose driver stopped (API.md §17.1, a crash after a wait ended): the resume took the
 * execution back to `pending` (./waits.ts, runner.ts) and the process driving it died before the run's next
 * step. Nothing of that pass is lost: its progress is the last sealed state and the waits that ended since, so
 * the run goes on from there instead of sitting pending until "execution timed out".
 *
 * A resumed pass renews `driverAt` on the execution item every DRIVER_RENEW_MS. The sweeper (`resumeLostRuns`,
 * pattern 15 filtered) hands every pending execution whose mark is older than DRIVER_STALE_MS to a runner, which
 * takes it over with one conditional write (same generation, same `driverAt`, same `stepBytes`: one taker, and
 * only if no step was recorded since its read) and drives it from the sealed state.
 *
 * A pass that recorded a node step of its own before it died is not taken over: its nodes' outputs are not in the
 * sealed state, and running them again would repeat their effects. Such a run ends as any run whose runner died
 * (API.md §10.3: "execution timed out").
 *
 * The same pass hands over runs that no runner ever started: the claim wrote the execution and the process died
 * before its hand-over (`execution.requested`) was published or run. Pending and unstarted for UNSTARTED_STALE_MS,
 * such a run is requested again; the runner's conditional start mark keeps a run that was only slow in its owner's
 * queue from running twice.
 */
import { log } from "../log";
import { lostRuns, openWaitsOf } from "../store/entities/execution";
import { requireBus } from "./bus/install";
import { useRuntime } from "../current-runtime";

/** How often a resumed pass renews its driver mark. */
export const DRIVER_RENEW_MS = 10_000;
/** A driver mark older than this is a dead driver's (six missed renewals: a busy event loop is not a crash). */
export const DRIVER_STALE_MS = 60_000;
/** A run claimed this long ago that no runner has started is requested again (longer than a busy owner's queue). */
export const UNSTARTED_STALE_MS = 300_000;

type Item = Record<string, unknown>;

/**
 * Whether `item` is a resumed pass whose driver stopped without recording a step of its own: pending, on a sealed
 * state, its mark stale, and no step recorded since the suspension but those of the waits that ended. The values
 * the take-over is conditional on, or undefined.
 */
export function lostPass(item: Item, now: number): { stateGeneration: number; driverAt: number; stepBytes: number } | undefined {
  const stateGeneration = Number(item.stateGeneration);
  const driverAt = Number(item.driverAt);
  const suspendedSteps = Number(item.suspendedSteps);
  if (item.status !== "pending" || !Number.isInteger(stateGeneration) || !Number.isInteger(suspendedSteps)) return undefined;
  if (!(driverAt < now - DRIVER_STALE_MS)) return undefined;
  const open = openWaitsOf(item);
  const ended = ((item.openWaits as string[] | undefined) ?? []).filter((id) => !open.has(id)).length;
  const steps = (item.stepIds as Set<string> | undefined)?.size ?? 0;
  if (steps > suspendedSteps + ended) return undefined;
  return { stateGeneration, driverAt, stepBytes: Number(item.stepBytes ?? 0) };
}

/**
 * The sweeper's pass over runs whose runner is gone: a resumed run whose driver stopped is handed to a runner as a
 * resume (the runner reads the state and takes the pass over), a run never started as a fresh request. A lost
 * hand-over is found again next pass. Returns how many were handed over.
 */
export async function resumeLostRuns(now = useRuntime().now(), max = 100): Promise<number> {
  const lost = await lostRuns(now - DRIVER_STALE_MS, now - UNSTARTED_STALE_MS, max);
  for (const execution of lost) {
    try {
      await requireBus().publish({
        type: "execution.requested",
        workflowId: execution.workflowId,
        executionId: execution.id,
        ...(execution.resume ? { resume: true } : {}),
      });
    } catch (err) {
      log.warn("could not hand a run whose runner is gone over; tried again next sweep", {
        executionId: execution.id,
        error: (err as Error).message,
      });
    }
  }
  return lost.length;
}
