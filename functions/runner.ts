/**
 * The runner queue's consumer (infra/runner.ts): runs the execution each `execution.requested` message names, or
 * resumes it when the event says `resume`. Idempotent per execution id, so SQS's redeliveries never run a workflow
 * twice; a record whose run threw is answered as a batch item failure, delivered again and, at last,
 * dead-lettered.
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { invocation, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { runnerBus } from "../shared/service/wire-aws-runner";
import { handleSqsBatch } from "../shared/execution/bus/sqs";
import { awsSandbox } from "../shared/service/wire-aws-sandbox";
import { resumeExecution, runExecution } from "../shared/execution/runner";

// This function is the queue's consumer: what it publishes itself runs in this instance (runnerBus). A workflow
// that completes has its schedules removed. Scripts run in the sandbox function (awsSandbox).
wireAws(runnerBus, awsScheduler, awsSandbox);

export const handler = invocation((event: SQSEvent): Promise<SQSBatchResponse> =>
  handleSqsBatch(event.Records, async (request) => {
    // `resume`: a waiting execution whose wait ended (API.md §17.1); both are idempotent per execution.
    if (request.resume) await resumeExecution(request.workflowId, request.executionId, request.from);
    else await runExecution(request.workflowId, request.executionId);
  }),
);
