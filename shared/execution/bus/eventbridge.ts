/**
 * The EventBridge adapter of the event bus (./event-bus.ts), for AWS: PutEvents to the app's bus; a rule
 * (infra/runner.ts) puts it in the runner queue, with retries and a dead-letter queue. Subscriptions there are
 * infrastructure, not code. `fromEventBridge` reads the event back from a queue message (./sqs.ts).
 */
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import type { BusEvent, EventBus } from "./event-bus";

/** EventBridge `source` of the app's events; the rule in infra/bus.ts matches it. */
export const EVENT_SOURCE = "workflow-automation";

export function createEventBridgeBus(options: { busName: string; client?: EventBridgeClient }): EventBus {
  const client = options.client ?? new EventBridgeClient({});
  return {
    remote: true,
    async publish(event) {
      const { type, ...detail } = event;
      const out = await client.send(
        new PutEventsCommand({
          Entries: [{ EventBusName: options.busName, Source: EVENT_SOURCE, DetailType: type, Detail: JSON.stringify(detail) }],
        }),
      );
      if (out.FailedEntryCount) {
        const entry = out.Entries?.[0];
        throw new Error(`EventBridge refused the event: ${entry?.ErrorCode ?? "unknown"} ${entry?.ErrorMessage ?? ""}`.trim());
      }
    },
    subscribe() {
      throw new Error("EventBridge subscriptions are rules declared in infra/bus.ts");
    },
  };
}

/** The bus event inside an EventBridge delivery to a Lambda target, or undefined when it is not one of ours. */
export function fromEventBridge(event: { source?: string; "detail-type"?: string; detail?: unknown }): BusEvent | undefined {
  if (event.source !== EVENT_SOURCE || event["detail-type"] !== "execution.requested") return undefined;
  const detail = event.detail as
    | {
        workflowId?: unknown;
        executionId?: unknown;
        owner?: unknown;
        resume?: unknown;
        from?: { generation?: unknown; pendingMs?: unknown };
      }
    | undefined;
  if (typeof detail?.workflowId !== "string" || typeof detail.executionId !== "string") return undefined;
  return {
    type: "execution.requested",
    workflowId: detail.workflowId,
    executionId: detail.executionId,
    ...(typeof detail.owner === "string" ? { owner: detail.owner } : {}),
    ...(detail.resume === true ? { resume: true } : {}),
    ...(typeof detail.from?.generation === "number" && typeof detail.from.pendingMs === "number"
      ? { from: { generation: detail.from.generation, pendingMs: detail.from.pendingMs } }
      : {}),
  };
}
