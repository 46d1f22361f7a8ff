/** HTTP routes of the workflow group (API.md §8.8.1-§8.8.6): endpoints.ts declares them; the domain does the work. */
import { route, type Route } from "../http/app";
import { decodePage, pageEnvelope } from "../http/paging";
import { useOwner } from "../context";
import * as Contract from "./endpoints";
import { create } from "./create";
import { list, count } from "./list";
import { getOwned } from "./stored";
import { remove, pause, resume } from "./lifecycle";

const LIST_ENDPOINT = "GET /workflows";

export const workflowRoutes: Route[] = [
  route(Contract.create, async (c, { body }) => {
    const workflow = await create(body);
    return c.json(workflow, 201, { Location: `/workflows/${workflow.id}` });
  }),
  route(Contract.list, async (c, { query }) => {
    const page = decodePage(query, LIST_ENDPOINT, useOwner());
    const result = await list(query, page);
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
  route(Contract.count, async (c, { query }) => c.json({ total: await count(query) })),
  route(Contract.retrieve, async (c, { params }) => c.json(await getOwned(params.id))),
  route(Contract.cancel, async (_c, { params }) => {
    await remove(params.id);
    return new Response(null, { status: 204 });
  }),
  route(Contract.pause, async (c, { params }) => c.json(await pause(params.id))),
  route(Contract.resume, async (c, { params }) => c.json(await resume(params.id))),
];
