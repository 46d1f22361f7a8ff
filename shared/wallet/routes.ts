/** HTTP routes of the wallet group (API.md §11). Handlers parse, call the domain, and shape the answer. */
import * as v from "valibot";
import type { Route } from "../http/app";
import { pathParam } from "../http/app";
import { BooleanQuery, ChainIdQuery, parse, parseParts, readJsonBody } from "../http/validate";
import { PageQuery, decodePage, pageEnvelope } from "../http/paging";
import { useOwner } from "../context";
import { readIdempotencyKey } from "../idempotency";
import * as Wallet from "./wallet";
import * as Withdraw from "./withdraw";

const ChainQuery = v.object({ chainId: v.optional(ChainIdQuery) });
const ListQuery = v.object({ chainId: v.optional(ChainIdQuery), includeHidden: v.optional(BooleanQuery, "false") });
const StatusList = v.pipe(
  v.array(v.string()),
  v.transform((values) => [...new Set(values.flatMap((x) => x.split(",")).map((x) => x.trim()).filter(Boolean))]),
  v.maxLength(50, "accepts at most 50 values"),
  v.array(Withdraw.ListStatus),
);

const WithdrawalListQuery = v.object({ chainId: v.optional(ChainIdQuery), status: v.optional(StatusList, []), ...PageQuery });

export const walletRoutes: Route[] = [
  {
    method: "GET",
    path: "/wallets",
    handler: async (c) => {
      const q = parse(ListQuery, c.req.query(), "query");
      return c.json({ data: await Wallet.list({ chainId: q.chainId, includeHidden: q.includeHidden === "true" }) });
    },
  },
  {
    method: "POST",
    path: "/wallets",
    handler: async (c) => {
      const input = parse(Wallet.CreateInput, await readJsonBody(c), "body");
      const { created, wallet } = await Wallet.create(input);
      return c.json(wallet, created ? 201 : 200);
    },
  },
  {
    method: "PATCH",
    path: "/wallets/{address}",
    handler: async (c) => {
      const body = await readJsonBody(c); // transport errors (413, 415, INVALID_JSON) come before field errors
      const { query, input } = parseParts({ query: [ChainQuery, c.req.query(), "query"], input: [Wallet.UpdateInput, body, "body"] });
      return c.json(await Wallet.update(pathParam(c, "address"), query.chainId, input));
    },
  },
  {
    method: "GET",
    path: "/wallets/{address}:getNonce",
    handler: async (c) => {
      const { chainId } = parse(ChainQuery, c.req.query(), "query");
      return c.json({ nonce: await Wallet.nonce(pathParam(c, "address"), chainId) });
    },
  },
  {
    method: "POST",
    path: "/wallets/{address}:withdraw",
    handler: async (c) => {
      const body = await readJsonBody(c);
      const key = readIdempotencyKey(c.req.header("idempotency-key"));
      const { result, replayed } = await Withdraw.withdraw(pathParam(c, "address"), body, key);
      if (replayed) c.header("Idempotency-Replayed", "true");
      return c.json(result, 200);
    },
  },
  {
    method: "GET",
    path: "/wallets/{address}/withdrawals",
    handler: async (c) => {
      const q = parse(WithdrawalListQuery, { ...c.req.query(), status: c.req.queries("status") }, "query");
      const endpoint = `withdrawals:${pathParam(c, "address").toLowerCase()}`;
      const page = decodePage(q, endpoint, useOwner());
      const { result, chain, wallet } = await Withdraw.listWithdrawals(pathParam(c, "address"), q.chainId, q.status, page);
      return c.json(
        pageEnvelope(result, (item) => item, (item) => Withdraw.withdrawalPosition(chain.chainId, wallet.address, String(item.id)), endpoint, useOwner()),
      );
    },
  },
  {
    method: "GET",
    path: "/wallets/{address}/withdrawals/{id}",
    handler: async (c) => {
      const { chainId } = parse(ChainQuery, c.req.query(), "query");
      return c.json(await Withdraw.getWithdrawal(pathParam(c, "address"), chainId, pathParam(c, "id")));
    },
  },
];
