/**
 * The local host's wiring: `npm start` (local/start.ts), the tests (tests/support/setup.ts) and the test and bench
 * service processes install every port's local adapter here. The runtime stays the host's own (it depends on the
 * local components it started). The AWS host's wiring is ./wire-aws.ts.
 */
import { setBus } from "../execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../execution/bus/in-process";
import { withRunner } from "../execution/runner";
import { setScheduler } from "../workflow/scheduler/install";
import { createLocalScheduler, type LocalScheduler } from "../workflow/scheduler/local";
import { fireTimeTrigger } from "../execution/time-fire";
import { setSandbox } from "../sandbox/port";
import { sandboxPool } from "../sandbox/pool";

/**
 * Installs the in-process bus with the runner subscribed (AWS: EventBridge → the runner function) and the local
 * scheduler, whose due fires live in the table and run once the host calls `scheduler.start()`; and this process's
 * sandbox pool (AWS: the sandbox function), started on first use.
 */
export function wireLocal(): { bus: InProcessBus; scheduler: LocalScheduler } {
  const bus = setBus(withRunner(createInProcessBus()));
  const scheduler = setScheduler(createLocalScheduler(fireTimeTrigger));
  setSandbox({ evaluate: (owner, evaluation, signal) => sandboxPool().evaluate(owner, evaluation, signal) });
  return { bus, scheduler };
}
