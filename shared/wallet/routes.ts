/** HTTP routes of the wallet group (API.md §11): endpoints.ts declares them; handlers call the domain and shape the answer. */
import { requestDeadline, route, type Route } from "../http/app";
import { decodePage, pageEnvelope } from "../http/paging";
import { useOwner } from "../context";
import * as Contract from "./endpoints";
import * as Wallet from "./wallet";
import * as Withdraw from "./withdraw";

export const walletRoutes: Route[] = [
  route(Contract.list, async (c, { query }) =>
    c.json({ data: await Wallet.list({ chainId: query.chainId, includeHidden: query.includeHidden === "true" }) }),
  ),
  route(Contract.create, async (c, { body }) => {
    const { created, wallet } = await Wallet.create(body);
    return c.json(wallet, created ? 201 : 200);
  }),
  route(Contract.update, async (c, { params, query, body }) => c.json(await Wallet.update(params.address, query.chainId, body))),
  route(Contract.nonce, async (c, { params, query }) => c.json({ nonce: await Wallet.nonce(params.address, query.chainId) })),
  route(Contract.withdraw, async (c, { params, headers, body }) => {
    const { result, replayed } = await Withdraw.withdraw(params.address, body, headers["Idempotency-Key"], requestDeadline(c));
    if (replayed) c.header("Idempotency-Replayed", "true");
    return c.json(result, 200);
  }),
  route(Contract.withdrawals, async (c, { params, query }) => {
    const endpoint = `withdrawals:${params.address.toLowerCase()}`;
    const page = decodePage(query, endpoint, useOwner());
    const { result, chain, wallet } = await Withdraw.listWithdrawals(params.address, query.chainId, query.status, page);
    return c.json(
      pageEnvelope(
        result,
        (item) => item,
        (item) => Withdraw.withdrawalPosition(chain.chainId, wallet.address, String(item.id)),
        endpoint,
        useOwner(),
      ),
    );
  }),
  route(Contract.withdrawal, async (c, { params, query }) =>
    c.json(await Withdraw.getWithdrawal(params.address, query.chainId, params.id)),
  ),
];
