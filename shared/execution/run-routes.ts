/** HTTP routes of running workflows and one node (API.md §8.8.7-§8.8.9, §17.2): run-endpoints.ts declares them; the domain does the work. */
import { route, type Route } from "../http/app";
import * as Contract from "./run-endpoints";
import * as Trigger from "./trigger";
import * as Simulation from "./simulate";
import { runNode } from "./node-run";

export const runRoutes: Route[] = [
  route(Contract.trigger, async (c, { params, headers, body }) => {
    const answer = await Trigger.trigger(params.id ?? "", body, headers["Idempotency-Key"]);
    if (answer.replayed) c.header("Idempotency-Replayed", "true");
    if (answer.location) c.header("Location", answer.location);
    return c.json(answer.result, answer.status);
  }),
  route(Contract.simulate, async (c, { body }) => c.json(await Simulation.simulate(body))),
  route(Contract.estimateFees, async (c, { body }) => c.json(await Simulation.estimate(body))),
  route(Contract.runNode, async (c, { body }) => c.json(await runNode(body))),
];
