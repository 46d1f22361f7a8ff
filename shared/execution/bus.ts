/**
 * The event-bus port (ARCHITECTURE.md): how a claimed execution reaches a runner. The trigger publishes
 * `execution.requested`; the runner consumes it. Two adapters:
 * - in-process (`npm start`, tests): delivery on a later turn of the event loop to every subscriber, so the
 *   publisher's request answers first, as it does in AWS;
 * - EventBridge (AWS): PutEvents to the app's bus; a rule (infra/bus.ts) targets the runner function, with
 *   retries and a dead-letter queue. Subscriptions there are infrastructure, not code.
 * Delivery is at least once in both: consumers must be idempotent (the runner is, per execution id).
 */
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { log } from "../log";

/** An execution was claimed and written `pending`; a runner should run it. */
interface ExecutionRequested {
  type: "execution.requested";
  workflowId: string;
  executionId: string;
  /** The workflow's owner: runs queue per owner (run-queue.ts). Absent on events from before it was added. */
  owner?: string;
  /** A waiting execution whose wait ended: resume it (API.md §17.1), rather than start it. */
  resume?: boolean;
  /** The state it waits on, as the publisher read it: the resume's conditional update needs no read of its own. */
  from?: { generation: number; pendingMs: number };
}
export type BusEvent = ExecutionRequested;

type BusHandler = (event: BusEvent) => Promise<void>;

export interface EventBus {
  /**
   * Delivers to another process (EventBridge → the runner function): a blocking trigger then hands its run over
   * and waits for the record, instead of running it in this process, which a Lambda freezes once it answers.
   */
  readonly remote?: boolean;
  publish(event: BusEvent): Promise<void>;
  /** Adds a handler for every event published from now on; returns the unsubscribe function. */
  subscribe(handler: BusHandler): () => void;
}

/** EventBridge `source` of the app's events; the rule in infra/bus.ts matches it. */
export const EVENT_SOURCE = "workflow-automation";

// ---------------------------------------------------------------------------------------------------------
// In-process adapter

export interface InProcessBus extends EventBus {
  /** Resolves once every delivery started so far (and those they caused) has finished: for tests and shutdown. */
  idle(): Promise<void>;
}

export function createInProcessBus(): InProcessBus {
  const handlers = new Set<BusHandler>();
  const inFlight = new Set<Promise<void>>();
  const deliver = async (handler: BusHandler, event: BusEvent) => {
    await new Promise((resolve) => setImmediate(resolve));
    try {
      await handler(event);
    } catch (err) {
      // EventBridge would retry and then dead-letter; locally the runner already ends a failed run `error`,
      // so an exception here is a bug worth a log line, and the sweeper ends what it left pending.
      log.error("bus handler failed", { event: event.type, executionId: event.executionId, error: (err as Error).message });
    }
  };
  return {
    async publish(event) {
      for (const handler of handlers) {
        const delivery = deliver(handler, event);
        inFlight.add(delivery);
        void delivery.finally(() => inFlight.delete(delivery));
      }
    },
    subscribe(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    async idle() {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// EventBridge adapter

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

// ---------------------------------------------------------------------------------------------------------
// The bus this process publishes to (installed by the host, like the runtime)

let current: EventBus | undefined;

export function setBus<B extends EventBus>(bus: B): B {
  current = bus;
  return bus;
}

export const currentBus = (): EventBus | undefined => current;

let makeDefault: (() => EventBus) | undefined;

/** The bus to use when the host installed none: the runner registers an in-process bus that runs executions. */
export function setDefaultBus(make: () => EventBus) {
  makeDefault = make;
}

/**
 * The installed bus, or the registered default (then installed). Hosts install one (npm start: in process with
 * the runner; AWS functions: EventBridge); the default serves tests and any process that loaded the runner.
 */
export function requireBus(): EventBus {
  if (current) return current;
  if (!makeDefault) throw new Error("No event bus is installed (setBus) and no runner is loaded in this process");
  return setBus(makeDefault());
}
