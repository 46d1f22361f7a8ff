/**
 * The in-process adapter of the event bus (./event-bus.ts), for `npm start` and tests: each published event is
 * delivered on a later turn of the event loop to every subscriber, so the publisher's request answers first, as
 * it does in AWS.
 */
import { log } from "../../log";
import type { BusEvent, BusHandler, EventBus } from "./event-bus";

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
      // The runner queue would deliver it again, then dead-letter it; locally the runner already ends a failed run
      // `error`, so an exception here is a bug worth a log line, and the sweeper ends what it left pending.
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
