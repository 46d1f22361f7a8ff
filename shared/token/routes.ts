/** HTTP route of token metadata (API.md §17.4): endpoints.ts declares it; the handler calls the domain. */
import { route, type Route } from "../http/app";
import * as Contract from "./endpoints";
import * as Token from "./token";

export const tokenRoutes: Route[] = [
  route(Contract.retrieve, async (c, { params, query }) => c.json(await Token.metadata(params.address, query.chainId))),
];
