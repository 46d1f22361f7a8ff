/** HTTP routes of the secrets API (API.md §12); the domain module does the validation and the work. */
import type { Route } from "../http/app";
import { pathParam } from "../http/app";
import { readJsonBody } from "../http/validate";
import { Secret } from "./index";

export const secretRoutes: Route[] = [
  {
    method: "GET",
    path: "/secrets",
    handler: async (c) => c.json(await Secret.list(c.req.query())),
  },
  {
    method: "PUT",
    path: "/secrets/{name}",
    handler: async (c) => {
      const body = await readJsonBody(c);
      const outcome = await Secret.put(pathParam(c, "name"), body);
      return new Response(null, { status: outcome === "created" ? 201 : 204 });
    },
  },
  {
    method: "DELETE",
    path: "/secrets/{name}",
    handler: async (c) => {
      await Secret.remove(pathParam(c, "name"), c.req.query());
      return new Response(null, { status: 204 });
    },
  },
];
