/**
 * The local runtime's chain settings (API.md §21.4), read by `npm start` before anything starts:
 * `LOCAL_CHAIN_IDS` (comma-separated chain ids, default `31337`: one devnet per id, the first is the default
 * chain) and `LOCAL_TOKENS` (default on; `0`/`false` off: plant each chain id's well-known contracts, tokens and
 * price feeds).
 */
import * as v from "valibot";

/** EIP-2294's bound on chain ids: the largest a signature's `v` can carry. */
const MAX_CHAIN_ID = 4_503_599_627_370_476;
/** Each chain is an anvil and a bundler: a handful is plenty on one machine. */
const MAX_LOCAL_CHAINS = 8;

const ChainIds = v.pipe(
  v.optional(v.string(), "31337"),
  v.transform((s) => s.split(",").map((id) => id.trim())),
  v.check(
    (ids) => ids.every((id) => /^[1-9]\d*$/.test(id) && Number(id) <= MAX_CHAIN_ID),
    "each chain id must be an integer from 1 to 4503599627370476",
  ),
  v.transform((ids) => ids.map(Number)),
  v.check((ids) => new Set(ids).size === ids.length, "a chain id may appear only once"),
  v.maxLength(MAX_LOCAL_CHAINS, `at most ${MAX_LOCAL_CHAINS} chains`),
);

const Switch = v.pipe(
  v.optional(v.string(), "true"),
  v.transform((s) => s.trim().toLowerCase()),
  v.picklist(["1", "true", "0", "false"], "must be 1, true, 0 or false"),
  v.transform((s) => s === "1" || s === "true"),
);

const Settings = v.object({ LOCAL_CHAIN_IDS: ChainIds, LOCAL_TOKENS: Switch });

export interface LocalChainSettings {
  /** One devnet per id, in this order; the first is the default chain and devnet.json's top level. */
  chainIds: number[];
  /** Plant each chain id's well-known contracts at their public addresses: tokens (./tokens.ts), price feeds (./feeds.ts). */
  tokens: boolean;
}

/** Reads LOCAL_CHAIN_IDS and LOCAL_TOKENS; throws naming each bad setting, as the service's config does. */
export function localChainSettings(env: Record<string, string | undefined> = process.env): LocalChainSettings {
  const given = { LOCAL_CHAIN_IDS: env.LOCAL_CHAIN_IDS || undefined, LOCAL_TOKENS: env.LOCAL_TOKENS || undefined };
  const result = v.safeParse(Settings, given);
  if (!result.success) {
    const lines = result.issues.map((issue) => {
      const name = v.getDotPath(issue) as keyof typeof given;
      return `${name}: ${issue.message} (got "${given[name]}")`;
    });
    throw new Error(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  return { chainIds: result.output.LOCAL_CHAIN_IDS, tokens: result.output.LOCAL_TOKENS };
}
