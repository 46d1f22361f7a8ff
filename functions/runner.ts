/**
 * EventBridge target (infra/bus.ts): runs the execution an `execution.requested` event names, or resumes it when
 * the event says `resume`. Idempotent per
 * execution id, so EventBridge's and Lambda's retries never run a workflow twice; an exception is rethrown so
 * the delivery is retried and, at last, dead-lettered.
 */
import type { EventBridgeEvent } from "aws-lambda";
import { invocation, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { runnerBus } from "../shared/service/wire-aws-runner";
import { awsSandbox } from "../shared/service/wire-aws-sandbox";
import { fromEventBridge } from "../shared/execution/bus/eventbridge";
import { resumeExecution, runExecution } from "../shared/execution/runner";
import { log } from "../shared/log";

// This function is the bus's consumer: what it publishes itself runs in this instance (runnerBus). A workflow
// that completes has its schedules removed. Scripts run in the sandbox function (awsSandbox).
wireAws(runnerBus, awsScheduler, awsSandbox);

export const handler = invocation(async (event: EventBridgeEvent<string, unknown>) => {
  const request = fromEventBridge(event);
  if (!request) {
    log.warn("runner ignored an event it does not handle", { source: event.source, detailType: event["detail-type"] });
    return;
  }
  // `resume`: a waiting execution whose wait ended (API.md §17.1); both are idempotent per execution.
  if (request.resume) await resumeExecution(request.workflowId, request.executionId, request.from);
  else await runExecution(request.workflowId, request.executionId);
});
