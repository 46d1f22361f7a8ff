/** The wallet routes (API.md §11) as declarations: shapes, documentation and codes; routes.ts binds the handlers. */
import * as v from "valibot";
import { endpoint, group } from "../http/endpoint";
import { IdempotencyHeaders } from "../http/schemas";
import * as S from "./schemas";

const UPSTREAM = { 502: ["UPSTREAM_UNAVAILABLE"], 503: ["UPSTREAM_UNAVAILABLE"] } as const;
const AddressParams = v.object({ address: S.WalletAddressPath });

export const list = endpoint({
  method: "GET",
  path: "/wallets",
  operationId: "listWallets",
  partner: { scope: "read", subject: true },
  summary: "List the caller's wallets",
  description:
    "The caller's wallets on the resolved chain, sorted by salt as a number ascending, then by `factoryAddress` (lowercase) ascending. Not paged.",
  query: S.ListQuery,
  responses: { 200: { description: "The wallets.", body: S.List } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"] },
});

export const create = endpoint({
  method: "POST",
  path: "/wallets",
  operationId: "createWallet",
  partner: { scope: "read", subject: true },
  summary: "Register a smart wallet (ensure registered)",
  description:
    "Registers the counterfactual smart account of (caller, chain, factory, salt). For the default factory the address is computed offline; for any other factory it is read from the factory's `getAddress(owner, salt)`. The account is deployed by its first user operation. Idempotent: an existing registration answers 200 with the wallet unchanged (even at the cap).",
  body: S.CreateInput,
  responses: {
    201: { description: "Newly registered.", body: S.Info },
    200: {
      description: "Already registered for (caller, chain, factory, salt): the existing wallet, unchanged (a hidden wallet stays hidden).",
      body: S.Info,
    },
  },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "INVALID_FACTORY"], 429: ["WALLETS_LIMIT_REACHED"], ...UPSTREAM },
  notes: {
    429: ({ limits }) =>
      `\`WALLETS_LIMIT_REACHED\` when registering would give the caller more than ${limits.maxWalletsPerOwner} wallets on that chain, hidden ones included. Nothing is written.`,
    502: "The chain RPC (needed for a non-default factory) answered with something invalid.",
    503: "The chain RPC (needed for a non-default factory) is unreachable or timed out.",
  },
});

export const update = endpoint({
  method: "PATCH",
  path: "/wallets/{address}",
  operationId: "updateWallet",
  summary: "Hide or show a wallet",
  description: "Updates the caller's wallet with that address on the resolved chain (keyed by address, never by salt).",
  params: AddressParams,
  query: S.ChainQuery,
  body: S.UpdateInput,
  responses: { 200: { description: "The wallet after the update.", body: S.Info } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND"] },
});

/** A sponsored-gas budget in words: `unlimited`, `no` (0) or the gas. */
const gasBudget = (gas: number) => (gas === Infinity ? "unlimited gas" : gas === 0 ? "no gas" : `${gas.toLocaleString("en-US")} gas`);

export const withdraw = endpoint({
  method: "POST",
  path: "/wallets/{address}:withdraw",
  operationId: "withdrawFromWallet",
  summary: "Withdraw funds from a wallet",
  description: ({ limits }) =>
    `Builds one user operation (native: a value transfer to the recipient through the account; ERC-20: \`transfer(recipient, amount)\` on the token), with init code if the account is not deployed, sponsored by the chain's paymaster when one is configured and within the sponsored-gas budgets (${gasBudget(limits.sponsoredGasPerOwnerPerDay)} per owner and ${gasBudget(limits.sponsoredGasPerChainPerDay)} for all owners on each chain over the last 24 hours, counted at the operation's gas limits; past either the wallet pays its own gas, and a wallet that cannot is refused with \`INSUFFICIENT_BALANCE\`, nothing sent), signs it and sends it to the chain's bundler, then waits up to ${limits.withdrawConfirmWaitMs} ms for the receipt. Every withdrawal that reached the send step is recorded and answered 200 whatever its status; a bundler rejection is never an HTTP error. Follow a \`pending\` one with \`GET /wallets/{address}/withdrawals/{id}\`. A repeat under the same \`Idempotency-Key\` sends nothing and answers the recorded withdrawal in its current state.`,
  idempotent: true,
  params: AddressParams,
  headers: IdempotencyHeaders,
  body: S.WithdrawBody,
  checkedByDomain: ["body"],
  responses: { 200: { description: "The withdrawal (`confirmed`, `pending` or `failed`).", body: S.WithdrawResult } },
  errors: {
    400: [
      "WITHDRAW_MISSING_FIELDS",
      "WITHDRAW_BAD_RECIPIENT",
      "WITHDRAW_BAD_AMOUNT",
      "WITHDRAW_BAD_TOKEN",
      "VALIDATION_FAILED",
      "UNSUPPORTED_CHAIN",
      "WALLET_NOT_OWNED",
      "INSUFFICIENT_BALANCE",
    ],
    404: ["WALLET_NOT_FOUND"],
    ...UPSTREAM,
  },
  notes: {
    400: "Checks apply in the order of the request body description; `UNSUPPORTED_CHAIN` also when the chain has no bundler.",
    502: "The RPC, bundler (gas estimation) or paymaster answered with something invalid before the operation was sent; nothing is recorded.",
    503: "The RPC, bundler or paymaster is unreachable before the operation was sent; nothing is recorded.",
  },
});

export const withdrawals = endpoint({
  method: "GET",
  path: "/wallets/{address}/withdrawals",
  operationId: "listWithdrawals",
  summary: "List a wallet's withdrawals",
  description:
    "The caller's withdrawals from that wallet on the resolved chain, newest first. Reading a `pending` withdrawal asks the bundler for its receipt (at most once per 5 s per withdrawal) and stores the outcome; if the bundler cannot be reached the last stored state is returned.",
  params: AddressParams,
  query: S.WithdrawalListQuery,
  responses: { 200: { description: "A page of withdrawals.", body: S.WithdrawResultPage } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "INVALID_CURSOR"], 404: ["WALLET_NOT_FOUND"] },
});

export const withdrawal = endpoint({
  method: "GET",
  path: "/wallets/{address}/withdrawals/{id}",
  operationId: "getWithdrawal",
  summary: "Retrieve a withdrawal",
  description:
    "One withdrawal, refreshed from the bundler when `pending` (as in the list). A withdrawal still without a receipt 30 minutes after `submittedAt` becomes `failed`.",
  params: v.object({ address: S.WalletAddressPath, id: S.WithdrawalIdPath }),
  query: S.ChainQuery,
  responses: { 200: { description: "The withdrawal.", body: S.WithdrawResult } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND", "WITHDRAWAL_NOT_FOUND"] },
});

export const nonce = endpoint({
  method: "GET",
  path: "/wallets/{address}:getNonce",
  operationId: "getWalletNonce",
  summary: "A wallet's EntryPoint nonce",
  description: 'The chain\'s EntryPoint `getNonce(address, 0)` for the wallet (`"0"` for an undeployed account).',
  params: AddressParams,
  query: S.ChainQuery,
  responses: { 200: { description: "The nonce.", body: S.Nonce } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND"], ...UPSTREAM },
});

export const walletContract = group({
  name: "Wallets",
  description: "Smart wallets registered by the caller, their withdrawals and nonces.",
  codes: {
    INVALID_FACTORY: {
      meaning:
        "The factory has no code, is the zero address, or its `getAddress` fails or returns zero, or returns a deployed account whose `owner()` is not the caller.",
    },
    WALLET_NOT_OWNED: {
      meaning:
        "Before signing for a wallet of a factory that is not known: the account is not deployed or its `owner()` is not the caller.",
    },
    WITHDRAW_MISSING_FIELDS: { meaning: "`recipientAddress`, `amount` or `token` missing.", fields: true },
    WITHDRAW_BAD_RECIPIENT: { meaning: "Recipient not an address, the zero address, or the wallet itself.", fields: true },
    WITHDRAW_BAD_AMOUNT: { meaning: "Amount not a positive wei integer and not `max`.", fields: true },
    WITHDRAW_BAD_TOKEN: {
      meaning: "Token not `ETH` and not an address, the zero address, or without contract code on the chain.",
      fields: true,
    },
    INSUFFICIENT_BALANCE: {
      meaning:
        "Balance preflight: balance below the amount, or zero with `max`; or, past the sponsored-gas budgets, a wallet that cannot pay the operation's gas on top of what it sends.",
    },
    WALLET_NOT_FOUND: { meaning: "Wallet not registered by the caller on the resolved chain." },
    WITHDRAWAL_NOT_FOUND: { meaning: "Withdrawal id unknown for that wallet." },
    WALLETS_LIMIT_REACHED: {
      meaning: "Wallet cap per owner per chain reached (hidden wallets count); `limit` is the cap. Not a rate limit: no `Retry-After`.",
      example: ({ limits }) => ({ limit: limits.maxWalletsPerOwner }),
    },
  },
  endpoints: [list, create, update, withdraw, withdrawals, withdrawal, nonce],
});
