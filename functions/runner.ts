/**
 * EventBridge target (infra/bus.ts): runs the execution an `execution.requested` event names. Idempotent per
 * execution id, so EventBridge's and Lambda's retries never run a workflow twice; an exception is rethrown so
 * the delivery is retried and, at last, dead-lettered.
 */
import "./bootstrap";
import "../shared/service/scheduler";
import type { EventBridgeEvent } from "aws-lambda";
import { fromEventBridge } from "../shared/execution/bus";
import { runExecution } from "../shared/execution/runner";
import { log } from "../shared/log";

export const handler = async (event: EventBridgeEvent<string, unknown>) => {
  const request = fromEventBridge(event);
  if (!request) {
    log.warn("runner ignored an event it does not handle", { source: event.source, detailType: event["detail-type"] });
    return;
  }
  await runExecution(request.workflowId, request.executionId);
};
