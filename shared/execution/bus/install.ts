/**
 * The event bus this process publishes to: installed by the host (`setBus`, like the runtime), used by domain code
 * (`requireBus`). The port is ./event-bus.ts; its adapters are ./in-process.ts and ./eventbridge.ts.
 */
import type { EventBus } from "./event-bus";

let current: EventBus | undefined;

/** Installs the process's bus (the host: a Lambda entry point, `npm start`, a test); answers it. */
export function setBus<B extends EventBus>(bus: B): B {
  current = bus;
  return bus;
}

/** The installed bus, if any (benchmarks put it back after swapping in their own). */
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
