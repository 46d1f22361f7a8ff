/**
 * What the chain says about an account's ownership: read by registration (./wallet.ts, API.md §11.1) and by the
 * check before the controller signs (./signing.ts, §11.3).
 */
import type { Address, PublicClient } from "viem";
import { contractRefused } from "../chain/chains";
import { controlledAccount } from "../chain/account";
import { upstreamError } from "../chain/upstream";

/** What the chain says about an address: no code, or an account and the owner it reports (none if owner() fails). */
export async function accountOwner(client: PublicClient, address: Address): Promise<{ deployed: boolean; owner?: Address }> {
  if (!(await hasCode(client, address))) return { deployed: false };
  try {
    return { deployed: true, owner: await controlledAccount.readOwner(client, address) };
  } catch (err) {
    if (contractRefused(err)) return { deployed: true };
    throw upstreamError(err);
  }
}

/** Whether `address` has code (an RPC failure: 503/502). */
export async function hasCode(client: PublicClient, address: Address): Promise<boolean> {
  try {
    const code = await client.getCode({ address });
    return code !== undefined && code !== "0x";
  } catch (err) {
    throw upstreamError(err);
  }
}
