/**
 * Smart wallets (API.md §11.1-11.4, §11.7): registration of counterfactual accounts owned by the caller's EOA,
 * the per-owner cap, hiding, and the EntryPoint nonce.
 */
import * as v from "valibot";
import { getAddress, isAddressEqual, zeroAddress, type Address } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { ApiError, notFound, quotaReached } from "../errors";
import { useOwner } from "../context";
import { createWallet, getWallet, setHidden, walletsOn, workflowStatusesOf, type WalletItem } from "../store/entities/wallet";
import { AddressString } from "../http/address-schemas";
import { CreateInput, UpdateInput, type Info } from "./schemas";
import { contractRefused, controllerSigner, isKnownFactory, publicClient, resolveCallerChain } from "../chain/chains";
import { controlledAccount } from "../chain/account";
import { upstreamError } from "../chain/upstream";
import { accountOwner } from "./account-owner";
import type { ChainSettings } from "../config";
import { useConfig, useRuntime } from "../current-runtime";

/** The stored record. */
export type WalletRecord = WalletItem;

const walletNotFound = () => notFound("WALLET_NOT_FOUND", "The wallet");

/** The caller's wallets on the resolved chain, sorted by salt as a number, then factory. */
export async function list(input: { chainId?: number; includeHidden: boolean }): Promise<Info[]> {
  const chain = resolveCallerChain(input.chainId);
  const owner = useOwner();
  const wallets = await walletsOn(owner, chain.chainId);
  const visible = wallets.filter((w) => input.includeHidden || !w.isHidden);
  visible.sort((a, b) => {
    const bySalt = BigInt(a.salt) - BigInt(b.salt);
    if (bySalt !== 0n) return bySalt < 0n ? -1 : 1;
    return a.factoryAddress.toLowerCase() < b.factoryAddress.toLowerCase() ? -1 : 1;
  });
  return Promise.all(visible.map((w) => toInfo(w)));
}

/** Registers (owner, chain, factory, salt); answers whether it was new. */
export async function create(input: v.InferOutput<typeof CreateInput>): Promise<{ created: boolean; wallet: Info }> {
  const chain = resolveCallerChain(input.chainId);
  const owner = useOwner();
  const factory = input.factoryAddress ?? (chain.factory ? getAddress(chain.factory) : undefined);
  if (!factory || isAddressEqual(factory, zeroAddress)) {
    throw new ApiError(400, "INVALID_FACTORY", "The factory address is not a usable account factory.");
  }
  const address = await deriveAddress(chain, factory, owner, BigInt(input.salt));

  const existing = await get(owner, chain.chainId, address);
  if (existing) return { created: false, wallet: await toInfo(existing) };

  const max = useConfig().limits.maxWalletsPerOwner;
  const record: WalletRecord = {
    owner,
    chainId: chain.chainId,
    address,
    salt: input.salt,
    factoryAddress: factory,
    isHidden: false,
    createdAt: useRuntime().now(),
  };
  const outcome = await createWallet({ ...record }, max);
  if (outcome === "exists") {
    const raced = await get(owner, chain.chainId, address);
    if (raced) return { created: false, wallet: await toInfo(raced) };
  }
  if (outcome !== "created") throw quotaReached("WALLETS_LIMIT_REACHED", "wallets per owner on this chain", max);
  return { created: true, wallet: await toInfo(record) };
}

/**
 * A known factory's address is derived offline, so it is the caller's by construction. Any other factory's answer
 * is a claim: refused when it names a deployed account that is not the caller's; an undeployed one cannot be
 * refuted yet and is checked again before anything is signed for it (signing.ts).
 */
async function deriveAddress(chain: ChainSettings, factory: Address, owner: Address, salt: bigint): Promise<Address> {
  if (isKnownFactory(chain, factory)) {
    return controlledAccount.predictAddress({ factory, controller: (await controllerSigner()).address, owner, salt });
  }
  const client = publicClient(chain);
  const invalidFactory = (why = "has no code on this chain or cannot derive an address") =>
    new ApiError(400, "INVALID_FACTORY", `The factory ${why}.`);
  let claimed: Address;
  try {
    const code = await client.getCode({ address: factory });
    if (!code || code === "0x") throw invalidFactory();
    claimed = await controlledAccount.claimedAddress({ client, factory, owner, salt });
  } catch (err) {
    if (err instanceof ApiError) throw err;
    if (contractRefused(err)) throw invalidFactory();
    throw upstreamError(err);
  }
  if (isAddressEqual(claimed, zeroAddress)) throw invalidFactory();
  const account = await accountOwner(client, claimed);
  if (account.deployed && !(account.owner && isAddressEqual(account.owner, owner))) {
    throw invalidFactory("answers an account that is not owned by the caller");
  }
  return getAddress(claimed);
}

export async function get(owner: Address, chainId: number, address: Address): Promise<WalletRecord | undefined> {
  return getWallet({ owner, chainId, address });
}

/** The caller's wallet at `rawAddress` on the resolved chain, or 404 (malformed addresses too). */
export async function requireOwned(rawAddress: string, chainId?: number): Promise<{ wallet: WalletRecord; chain: ChainSettings }> {
  const chain = resolveCallerChain(chainId);
  const parsed = v.safeParse(AddressString, rawAddress);
  if (!parsed.success) throw walletNotFound();
  const wallet = await get(useOwner(), chain.chainId, parsed.output);
  if (!wallet) throw walletNotFound();
  return { wallet, chain };
}

export async function update(rawAddress: string, chainId: number | undefined, input: v.InferOutput<typeof UpdateInput>): Promise<Info> {
  const { wallet, chain } = await requireOwned(rawAddress, chainId);
  if (input.isHidden === undefined || input.isHidden === wallet.isHidden) return toInfo(wallet);
  const updated = await setHidden({ owner: wallet.owner, chainId: chain.chainId, address: wallet.address }, input.isHidden);
  return toInfo(updated);
}

/** EntryPoint `getNonce(wallet, 0)`: "0" for an undeployed account. */
export async function nonce(rawAddress: string, chainId?: number): Promise<string> {
  const { wallet, chain } = await requireOwned(rawAddress, chainId);
  try {
    const value = await publicClient(chain).readContract({
      address: getAddress(chain.entryPoint),
      abi: entryPoint07Abi,
      functionName: "getNonce",
      args: [wallet.address, 0n],
    });
    return value.toString();
  } catch (err) {
    throw upstreamError(err);
  }
}

/**
 * Workflow counts by effective status for a wallet: its workflows listed on gsi3 `OWNER#o#WALLET#<address>#WF`
 * (gsi2 for records written before gsi3; shared/store/README.md, pattern 12).
 */
async function workflowCounts(owner: Address, address: Address) {
  const counts = { enabled: 0, disabled: 0, completed: 0, failed: 0 };
  const now = useRuntime().now();
  for (const item of await workflowStatusesOf(owner, address)) {
    const stored = item.status as keyof typeof counts;
    const expired = (stored === "enabled" || stored === "disabled") && typeof item.expiredAt === "number" && item.expiredAt <= now;
    const status = expired ? "completed" : stored;
    if (status in counts) counts[status] += 1;
  }
  return counts;
}

async function toInfo(w: WalletRecord): Promise<Info> {
  const c = await workflowCounts(w.owner, w.address);
  return {
    address: getAddress(w.address),
    salt: w.salt,
    factoryAddress: getAddress(w.factoryAddress),
    isHidden: w.isHidden,
    totalWorkflowCount: c.enabled + c.disabled + c.completed + c.failed,
    enabledWorkflowCount: c.enabled,
    disabledWorkflowCount: c.disabled,
    completedWorkflowCount: c.completed,
    failedWorkflowCount: c.failed,
  };
}
