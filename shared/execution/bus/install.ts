/**
 * The event bus this process publishes to: installed by the host (`setBus`, like the runtime), used by domain code
 * (`requireBus`). The port is ./event-bus.ts; its adapters are ./in-process.ts and ./sqs-publisher.ts.
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

/**
 * The installed bus. Every host installs one through its wiring (npm start and the tests: in process with the
 * runner; the AWS functions: the runner queue, or the runner function's own in-process bus); nothing installs one as a
 * side effect of an import.
 */
export function requireBus(): EventBus {
  if (!current) throw new Error("No event bus is installed: the host's wiring installs one (shared/service/wire-*.ts)");
  return current;
}
