/**
 * The HTTP route of `POST /triggers:run` (API.md §17.3), declared with the workflow runs (shared/execution/run-endpoints.ts)
 * and served by the workflows group; it lives here, above the execution layer, because an event trigger's answer
 * asks the chain the way the watcher does (event-scan.ts).
 */
import { route, type Route } from "../http/app";
import * as Contract from "../execution/run-endpoints";
import { runTrigger } from "./trigger-run";

export const triggerRunRoutes: Route[] = [route(Contract.runTrigger, async (c, { body }) => c.json(await runTrigger(body)))];
