/**
 * The runner function's bus (functions/runner.ts): it is the runner queue's consumer, so what it publishes itself
 * (a run handed on after its wait ended, a claim recovered) runs in this instance, through the runner's fair
 * queue, rather than going round the queue again. A module of its own, like
 * ./wire-aws-scheduler.ts, so that only the runner function bundles the runner through its wiring.
 */
import type { Port } from "./wire-aws";
import { setBus } from "../execution/bus/install";
import { createInProcessBus } from "../execution/bus/in-process";
import { withRunner } from "../execution/runner";

export const runnerBus: Port = () => void setBus(withRunner(createInProcessBus()));
