/**
 * Smart wallets (API.md §11; shared/wallet/wallet.ts): one item per (owner, chain, address) in the owner's
 * partition. Owned here: the per-owner cap per chain (a create and the owner's `wallets#<chainId>` counter in one
 * transaction), hiding only an existing wallet, the deployment turn of an undeployed account (API.md §19: one
 * operation with init code at a time, whatever the process), and the reads: one wallet, the owner's wallets on a
 * chain, and the statuses of the workflows of a wallet (pattern 12, workflow items on GSI2).
 */
import type { Address } from "../../address";
import { defineEntity, transact, type Stored } from "../entity";
import { queryPages } from "../query";
import { remove, set, when } from "../expression";
import { incrementBelow } from "../counters";
import { Keys } from "../item-keys";
import { Index, failedConditions, isConditionFailure } from "../table";

export interface WalletId {
  owner: string;
  chainId: number;
  address: string;
}

/** A registered wallet (shared/wallet/wallet.ts WalletRecord). */
export interface WalletItem {
  owner: Address;
  chainId: number;
  address: Address;
  salt: string;
  factoryAddress: Address;
  isHidden: boolean;
  createdAt: number;
  /** A deployment turn's holder and end (ms), while one is held (`takeDeploymentTurn`). */
  deployingBy?: string;
  deployingUntil?: number;
}

const Wallet = defineEntity<WalletItem, WalletId>({
  type: "wallet",
  version: 1,
  key: ({ owner, chainId, address }) => Keys.wallet(owner, chainId, address),
});

/** The wallet, or undefined (strongly consistent). */
export const getWallet = (id: WalletId) => Wallet.get(id, { consistent: true });

/** The owner's wallets on a chain (one strongly consistent Query: far fewer than a page). */
export async function walletsOn(owner: string, chainId: number): Promise<Stored<WalletItem>[]> {
  const page = await Wallet.query({ pk: Keys.owner(owner), sk: { beginsWith: Keys.walletPrefix(chainId) }, consistent: true });
  return page.items;
}

/**
 * Writes the new wallet and counts it, in one transaction, only while it does not exist and the owner has fewer
 * than `max` wallets on its chain: "exists" when it was there already, else "full" when refused.
 */
export async function createWallet(record: WalletItem, max: number): Promise<"created" | "exists" | "full"> {
  const id = { owner: record.owner, chainId: record.chainId, address: record.address };
  try {
    await transact([Wallet.tx.put(id, record, { if: when.notExists() }), incrementBelow(record.owner, `wallets#${record.chainId}`, max)]);
    return "created";
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    const [walletFailed] = failedConditions(err);
    return walletFailed ? "exists" : "full";
  }
}

/** Sets `isHidden` on an existing wallet; answers the whole item after. */
export async function setHidden(id: WalletId, isHidden: boolean): Promise<Stored<WalletItem>> {
  return (await Wallet.update(id, [set("isHidden", isHidden)], { if: when.exists(), returnValues: "ALL_NEW" }))!;
}

/**
 * Takes the deployment turn of an undeployed wallet for `holder` until `until` (ms): one conditional UpdateItem on the
 * wallet item, `deployingBy` and `deployingUntil` set only if no turn is held (absent, or its lease ended before
 * `now`). Answers `{taken: true}`, or the lease end of the turn another operation holds.
 */
export async function takeDeploymentTurn(
  id: WalletId,
  holder: string,
  now: number,
  until: number,
): Promise<{ taken: true } | { taken: false; until: number }> {
  try {
    await Wallet.update(id, [set("deployingBy", holder), set("deployingUntil", until)], {
      if: when.and(when.exists(), when.or(when.notExists("deployingUntil"), when.lt("deployingUntil", now))),
      returnOldOnFailure: true,
    });
    return { taken: true };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // The document client does not unmarshall the item carried by the exception: it is a raw AttributeValue map.
    const held = (err as { Item?: { deployingUntil?: { N?: string } } }).Item?.deployingUntil?.N;
    return { taken: false, until: held === undefined ? now : Number(held) };
  }
}

/** Ends `holder`'s deployment turn (nothing when another holds it now). */
export async function endDeploymentTurn(id: WalletId, holder: string): Promise<void> {
  try {
    await Wallet.update(id, [remove("deployingBy"), remove("deployingUntil")], { if: when.eq("deployingBy", holder) });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/**
 * `status` and `expiredAt` of every workflow of the owner's wallet (pattern 12: the workflow records' GSI3 keys,
 * read by key, and GSI2 for records written before GSI3).
 */
export async function workflowStatusesOf(owner: string, address: string): Promise<{ status?: string; expiredAt?: number }[]> {
  const statuses: { status?: string; expiredAt?: number }[] = [];
  const pk = Keys.workflowByWallet(owner, address, "").gsi3pk;
  for (const index of [Index.gsi3, Index.gsi2])
    for await (const page of queryPages({ index, pk, attributes: ["status", "expiredAt"] }))
      for (const { status, expiredAt } of page.items)
        statuses.push({
          status: typeof status === "string" ? status : undefined,
          expiredAt: typeof expiredAt === "number" ? expiredAt : undefined,
        });
  return statuses;
}
