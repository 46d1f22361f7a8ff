/** The token route (API.md §17.4) as a declaration: shapes, documentation and codes; routes.ts binds the handler. */
import * as v from "valibot";
import { component, described, endpoint, group } from "../http/endpoint";
import { ChainIdQuery } from "../http/validate";
import { ChainId } from "../http/schemas";
import { Address, AddressString } from "../http/address-schemas";

/** API.md §17.4: the address that names a chain's native token. */
export const NATIVE_TOKEN = "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE";

const TokenParams = v.object({
  address: v.pipe(
    AddressString,
    v.description(
      `The token's contract address (API.md §1.5: any accepted case), or \`${NATIVE_TOKEN}\` for the chain's native token. Unlike other path identifiers, a malformed address answers 400 \`VALIDATION_FAILED\` (path \`path.address\`): it is a question about any contract, not a record of ours.`,
    ),
    v.examples([NATIVE_TOKEN]),
  ),
});

const TokenQuery = v.object({
  chainId: v.optional(
    described(
      ChainIdQuery,
      "Decimal digits. Non-zero: that chain, which must be configured (400 `UNSUPPORTED_CHAIN`). `0` or absent: the JWT `aud` chain if configured, else `default_chain_id`.",
    ),
  ),
});

export const Metadata = component(
  "TokenMetadata",
  v.object({
    found: described(
      v.boolean(),
      "`true` for the native sentinel, or a contract answering ERC-20 `decimals()` (0-255) and `symbol()`. Never a placeholder: anything else is `false`, with no other metadata member.",
    ),
    address: described(Address, "The token address (EIP-55)."),
    chainId: ChainId,
    name: v.optional(described(v.string(), "From the contract (`bytes32` answers decoded); absent when the contract has none.")),
    symbol: v.optional(described(v.string(), "From the contract (`bytes32` answers decoded), or the chain's native symbol.")),
    decimals: v.optional(described(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(255)), "0-255.")),
    source: described(
      v.picklist(["native", "rpc", "cache"]),
      "`native` (the sentinel, from the chain's configuration), `rpc` (read from the chain now) or `cache` (read earlier: metadata is kept 24 hours, a `found: false` 10 minutes). Present on `found: false` answers too.",
    ),
  }),
);
export type Metadata = v.InferOutput<typeof Metadata>;

export const retrieve = endpoint({
  method: "GET",
  path: "/tokens/{address}",
  operationId: "getTokenMetadata",
  summary: "ERC-20 token metadata",
  description:
    "Reads `decimals()`, `symbol()` and `name()` of the contract on the resolved chain (string or `bytes32` answers), or answers the chain's native token for the sentinel address without a chain call. What was read is cached in the table for every caller: 24 hours when found, 10 minutes when not; a chain that cannot be read is never cached, and answers 502/503 when nothing is cached.",
  partner: { scope: "read" },
  params: TokenParams,
  query: TokenQuery,
  responses: { 200: { description: "The token's metadata, or `found: false`.", body: Metadata } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 502: ["UPSTREAM_UNAVAILABLE"], 503: ["UPSTREAM_UNAVAILABLE"] },
  notes: {
    502: "The chain RPC answered with something invalid and nothing is cached for the token.",
    503: "The chain RPC is unreachable or timed out and nothing is cached for the token.",
  },
});

export const tokenContract = group({
  name: "Tokens",
  description: "Token metadata read from the chain (served by the wallets function).",
  endpoints: [retrieve],
});
