/**
 * The scheduler port's installer for the AWS wiring (./wire-aws.ts), in a module of its own: its adapters bring
 * the time fire and croner, which only the functions that start or stop firing (or fire) may bundle.
 */
import type { Port } from "./wire-aws";
import { setLazyScheduler } from "../workflow/scheduler/install";
import { createLocalScheduler } from "../workflow/scheduler/local";
// Static, not import(): a dynamic import makes esbuild wrap everything it reaches for lazy start-up, and the
// wrapped AWS SDK clients then keep every command they have (+45 KB DynamoDB, +25 KB KMS per function).
import { eventBridgeSchedulerFromEnvironment } from "../workflow/scheduler/eventbridge";
import { fireTimeTrigger } from "../execution/time-fire";

/**
 * The scheduler, made on first use (so importing needs no schedule settings): EventBridge Scheduler where
 * infra/scheduler.ts configured the function (SCHEDULE_GROUP set), else the local adapter, whose due items are
 * inert until a loop reads them (a function deployed without the scheduler's settings, the Lambda harness).
 */
export const awsScheduler: Port = () =>
  setLazyScheduler(() =>
    process.env.SCHEDULE_GROUP ? eventBridgeSchedulerFromEnvironment(fireTimeTrigger) : createLocalScheduler(fireTimeTrigger),
  );
