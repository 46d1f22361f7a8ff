/** HTTP routes of the secrets API (API.md §12): endpoints.ts declares them; the domain validates and does the work. */
import { route, type Route } from "../http/app";
import * as Contract from "./endpoints";
import * as Secret from "./secret";

export const secretRoutes: Route[] = [
  route(Contract.list, async (c, { query }) => c.json(await Secret.list(query))),
  route(Contract.put, async (c, { params, body }) => {
    const outcome = await Secret.put(params.name, body);
    return new Response(null, { status: outcome === "created" ? 201 : 204 });
  }),
  route(Contract.remove, async (c, { params, query }) => {
    await Secret.remove(params.name, query);
    return new Response(null, { status: 204 });
  }),
];
