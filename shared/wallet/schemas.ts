/**
 * The shapes of the wallet API (API.md §11): request schemas the app or the domain validates with, and the
 * answers the domain builds. No chain code here: the declarations (endpoints.ts) and the document import this module.
 */
import * as v from "valibot";
import { ChainIdNumber, ChainIdQuery, BooleanQuery } from "../http/validate";
import { component, described, parameter } from "../http/endpoint";
import { PageQuery, page } from "../http/paging";
import { Bytes32, ChainId, TimeMs, Ulid, Uint256, listOf } from "../http/schemas";
import { Address } from "../http/address-schemas";

const CHAIN_RULE = "`0` or absent: the JWT `aud` chain if configured, else `default_chain_id`.";

// ---------------------------------------------------------------------------------------------------------
// Requests

export const CreateInput = component(
  "WalletCreateRequest",
  v.pipe(
    v.strictObject({
      salt: described(
        Uint256,
        "`0` to 2^256 − 1, canonical decimal; anything else (negative, empty, hex, leading zeros, too large) → 400 `VALIDATION_FAILED`.",
      ),
      factoryAddress: v.optional(
        described(
          Address,
          "Default: the chain's configured factory. Known factories (the chain's default and its configured list) derive the address offline. Any other factory must have code on the chain and its view `getAddress(address owner, uint256 salt)` must return a non-zero address that is not a deployed account of another owner, else 400 `INVALID_FACTORY` (also for the zero address); nothing is signed for such a wallet until its deployed account reports the caller as `owner()`.",
        ),
      ),
      chainId: v.optional(described(ChainIdNumber, `Chain per API.md §5: non-zero → that chain (must be configured); ${CHAIN_RULE}`)),
    }),
    v.description("Ensure a wallet is registered for (caller, chain, factory, salt)."),
  ),
);

export const UpdateInput = component(
  "WalletUpdateRequest",
  v.pipe(
    v.strictObject({
      isHidden: v.optional(
        described(v.boolean("must be a boolean"), "Hide or show the wallet in `GET /wallets` (hidden wallets still count toward the cap)."),
      ),
    }),
    v.description("`{}` changes nothing."),
  ),
);

/** A wei amount greater than 0 (at most 2^256 − 1). */
const PositiveWei = v.pipe(
  v.string(),
  v.regex(/^[1-9][0-9]*$/, "must be a wei amount greater than 0"),
  v.check((s) => !/^[1-9][0-9]*$/.test(s) || (s.length <= 78 && BigInt(s) < 2n ** 256n), "must be at most 2^256 - 1"),
  v.metadata({ maxLength: 78 }),
);

/**
 * Body of `:withdraw`. The domain (withdraw.ts) checks it member by member, each with its own code, in the
 * order this description gives; the app only reads it.
 */
export const WithdrawBody = component(
  "WithdrawRequest",
  v.pipe(
    v.strictObject({
      recipientAddress: described(Address, "Not the zero address, not the wallet itself."),
      amount: v.pipe(
        v.union([v.literal("max"), PositiveWei]),
        v.description(
          'Wei as a canonical decimal greater than 0 (at most 2^256 − 1), or `"max"`: the whole balance (for the native token when the wallet pays its own gas, the balance minus the operation\'s maximum gas cost).',
        ),
      ),
      token: v.pipe(
        v.union([v.literal("ETH"), Address]),
        v.description('`"ETH"` (exactly) for the chain\'s native token, or a non-zero ERC-20 contract Address.'),
      ),
      chainId: v.optional(
        described(
          ChainIdNumber,
          "`0` or absent: the caller's default chain (JWT `aud`, else `default_chain_id`). The chain must be configured with a bundler.",
        ),
      ),
    }),
    v.description(
      "Checks, in order: missing `recipientAddress`, `amount` or `token` → `WITHDRAW_MISSING_FIELDS`; bad recipient → `WITHDRAW_BAD_RECIPIENT`; bad amount → `WITHDRAW_BAD_AMOUNT`; bad token → `WITHDRAW_BAD_TOKEN`; other shape errors (unknown members, bad `chainId`) → `VALIDATION_FAILED`; chain not configured or without a bundler → `UNSUPPORTED_CHAIN`; wallet not the caller's on that chain → 404 `WALLET_NOT_FOUND`; a wallet of a factory that is not known whose deployed account does not report the caller as `owner()` → `WALLET_NOT_OWNED`; token without contract code, or a contract that is not an ERC-20 → `WITHDRAW_BAD_TOKEN`; balance preflight → `INSUFFICIENT_BALANCE`; RPC, bundler or paymaster unusable before sending → 502/503 `UPSTREAM_UNAVAILABLE` (nothing recorded).",
    ),
  ),
);

// ---------------------------------------------------------------------------------------------------------
// Path and query parameters

/** A malformed address is an unknown one (404), so the path takes any string. */
export const WalletAddressPath = parameter(
  "WalletAddress",
  v.pipe(
    v.string(),
    v.description(
      "The wallet's address (any accepted case). A malformed address is treated like an unknown one (404 `WALLET_NOT_FOUND`). The wallet must be registered by the caller on the resolved chain.",
    ),
    v.examples(["0x5B38Da6a701c568545dCfcB03FcB875f56beddC4"]),
  ),
);

export const WithdrawalIdPath = parameter(
  "WithdrawalId",
  v.pipe(v.string(), v.description("Withdrawal id (ULID, any letter case). Malformed or unknown → 404 `WITHDRAWAL_NOT_FOUND`.")),
);

const ChainIdParameter = parameter(
  "ChainId",
  v.optional(
    described(
      ChainIdQuery,
      "Decimal digits. Non-zero: that chain, which must be configured (400 `UNSUPPORTED_CHAIN`). `0` or absent: the JWT `aud` chain if configured, else `default_chain_id`.",
    ),
  ),
);

export const ChainQuery = v.object({ chainId: ChainIdParameter });

export const ListQuery = v.object({
  chainId: ChainIdParameter,
  includeHidden: v.optional(described(BooleanQuery, "Exactly `true` or `false`; `true` includes hidden wallets."), "false"),
});

export const Status = v.picklist(["pending", "confirmed", "failed"], "must be pending, confirmed or failed");
export type Status = v.InferOutput<typeof Status>;

const StatusList = listOf(
  Status,
  "Only withdrawals with one of these statuses. Repeated keys (`?status=pending&status=failed`), comma-separated values (`?status=pending,failed`) or both; empty items are ignored, duplicates merged, at most 50 values.",
);

export const WithdrawalListQuery = v.object({ chainId: ChainIdParameter, status: v.optional(StatusList, []), ...PageQuery });

// ---------------------------------------------------------------------------------------------------------
// Answers

export const Info = component(
  "Wallet",
  v.object({
    address: described(Address, "Derived smart-account address (EIP-55)."),
    salt: described(Uint256, "Canonical decimal."),
    factoryAddress: described(Address, "The factory used (the chain's configured default when none was given)."),
    isHidden: described(v.boolean(), "`false` at registration."),
    totalWorkflowCount: described(count(), "The caller's workflows whose `smartWalletAddress` is this address (any chain)."),
    enabledWorkflowCount: count(),
    disabledWorkflowCount: count(),
    completedWorkflowCount: count(),
    failedWorkflowCount: described(count(), "The four counts by effective status sum to `totalWorkflowCount`."),
  }),
);
export type Info = v.InferOutput<typeof Info>;

function count() {
  return v.pipe(v.number(), v.integer(), v.minValue(0));
}

export const List = component(
  "WalletList",
  v.pipe(v.object({ data: v.array(Info) }), v.description("Not paged (the wallet cap keeps it short).")),
);

export const Nonce = component(
  "WalletNonce",
  v.object({ nonce: described(Uint256, 'The EntryPoint\'s `getNonce(address, 0)`; `"0"` for an undeployed account.') }),
);

export const WithdrawResult = component(
  "WithdrawResult",
  v.object({
    id: described(Ulid, "Withdrawal record id."),
    chainId: ChainId,
    status: described(
      Status,
      "`confirmed`: receipt received and successful. `pending`: accepted by the bundler, no receipt yet. `failed`: the bundler or paymaster rejected the operation, it was included and reverted, or it was not included within 30 minutes. `confirmed` and `failed` are final.",
    ),
    message: v.optional(described(v.string(), "Reason when `failed`; otherwise absent.")),
    userOpHash: v.optional(described(Bytes32, "Once accepted by the bundler (or computed locally when the bundler's answer was lost).")),
    transactionHash: v.optional(described(Bytes32, "Once included.")),
    submittedAt: described(TimeMs, "When the operation was sent."),
    smartWalletAddress: Address,
    recipientAddress: Address,
    amount: described(Uint256, "The wei amount actually requested (`max` resolved)."),
    token: described(v.union([v.literal("ETH"), Address]), '`"ETH"` or the token Address.'),
  }),
);

export const WithdrawResultPage = page("WithdrawResultPage", WithdrawResult);
