/**
 * EventBridge Scheduler target (infra/scheduler.ts): one fire of a cron or fixedTime trigger,
 * `{workflowId, triggerId, instant}` (a cron schedule's instant is its scheduled time, an ISO string). The fire is
 * claimed once (a repeated delivery is a no-op) and handed to the runner through the bus; an exception is rethrown
 * so the scheduler retries and, past the outage grace, dead-letters.
 */
import { awsBus, invocation, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { setScheduler } from "../shared/workflow/scheduler/install";
import { eventBridgeSchedulerFromEnvironment, type EventBridgeScheduler } from "../shared/workflow/scheduler/eventbridge";
import { log } from "../shared/log";
import { fireTimeTrigger } from "../shared/execution/time-fire";
import { useRuntime } from "../shared/current-runtime";

wireAws(awsBus, awsScheduler);
// Made on the first fire, so importing the bundle needs no schedule settings.
let scheduler: EventBridgeScheduler | undefined;

export const handler = invocation(async (event: { workflowId?: unknown; triggerId?: unknown; instant?: unknown }) => {
  scheduler ??= setScheduler(eventBridgeSchedulerFromEnvironment(fireTimeTrigger));
  const result = await scheduler.deliver(event, useRuntime().now());
  if (result.outcome !== "fired")
    log.info("time fire not run", { workflowId: String(event.workflowId), instant: String(event.instant), ...result });
  return result;
});
