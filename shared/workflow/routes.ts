/** HTTP routes of the workflow group (API.md §8.8.1-§8.8.6): endpoints.ts declares them; the domain does the work. */
import { route, type Route } from "../http/app";
import { decodePage, pageEnvelope } from "../http/paging";
import { useOwner } from "../context";
import * as Contract from "./endpoints";
import * as Workflow from "./workflow";

const LIST_ENDPOINT = "GET /workflows";

export const workflowRoutes: Route[] = [
  route(Contract.create, async (c, { body }) => {
    const workflow = await Workflow.create(body);
    return c.json(workflow, 201, { Location: `/workflows/${workflow.id}` });
  }),
  route(Contract.list, async (c, { query }) => {
    const page = decodePage(query, LIST_ENDPOINT, useOwner());
    const result = await Workflow.list(query, page);
    return c.json(
      pageEnvelope(
        result,
        (w) => w,
        (w) => String(w.id),
        LIST_ENDPOINT,
        useOwner(),
      ),
    );
  }),
  route(Contract.count, async (c, { query }) => c.json({ total: await Workflow.count(query) })),
  route(Contract.retrieve, async (c, { params }) => c.json(await Workflow.getOwned(params.id))),
  route(Contract.cancel, async (_c, { params }) => {
    await Workflow.remove(params.id);
    return new Response(null, { status: 204 });
  }),
  route(Contract.pause, async (c, { params }) => c.json(await Workflow.pause(params.id))),
  route(Contract.resume, async (c, { params }) => c.json(await Workflow.resume(params.id))),
];
