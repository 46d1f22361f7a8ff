/**
 * Ownership before signing (API.md §11.3): the one place where the service's controller signs a user operation
 * for a wallet. The controller is accepted by every account our factories create, so a wallet record is not
 * enough: the account must be provably its owner's. For a known factory the address is derived offline from
 * (owner, salt); any other factory's account must be deployed and report the owner as `owner()`.
 *
 *   const signable = await verifySignable(wallet, chain);   // 400 WALLET_NOT_OWNED, or 503/502
 *   ... build the operation for signable.address (init code only when signable.known && !signable.deployed) ...
 *   op = await signWalletOperation(signable, op, chain);
 */
import { getAddress, isAddressEqual, type Address } from "viem";
import { ApiError } from "../errors";
import { controllerSigner, isKnownFactory, publicClient } from "../chain/chains";
import { controlledAccount } from "../chain/account";
import type { ChainSettings } from "../config";
import type { WalletRecord } from "./wallet";
import { accountOwner, hasCode } from "./account-owner";
import type { UserOperationV07 } from "../chain/userop-signer";

/** A wallet whose account is its owner's, checked by verifySignable (the only way to get one). */
export interface SignableWallet {
  readonly chainId: number;
  readonly address: Address;
  readonly owner: Address;
  readonly factory: Address;
  readonly salt: bigint;
  /** A known factory of the chain: init code may be built for it. */
  readonly known: boolean;
  readonly deployed: boolean;
}

// A cast cannot forge one: signWalletOperation only accepts objects verifySignable handed out.
const verified = new WeakSet<SignableWallet>();

const walletNotOwned = () =>
  new ApiError(
    400,
    "WALLET_NOT_OWNED",
    "The wallet's account is not provably the caller's: it is not deployed or its owner() is not the caller.",
  );

/** Checks that `wallet`'s account is its owner's; 400 WALLET_NOT_OWNED otherwise (the RPC down: 503/502). */
export async function verifySignable(wallet: WalletRecord, chain: ChainSettings): Promise<SignableWallet> {
  if (wallet.chainId !== chain.chainId) throw new Error(`wallet of chain ${wallet.chainId} used on chain ${chain.chainId}`);
  const address = getAddress(wallet.address);
  const owner = getAddress(wallet.owner);
  const factory = getAddress(wallet.factoryAddress);
  const salt = BigInt(wallet.salt);
  const known = isKnownFactory(chain, factory);
  let deployed: boolean;
  if (known) {
    // A record not derived from (owner, salt) was not made by registration: never trust it.
    const derived = controlledAccount.predictAddress({ factory, controller: (await controllerSigner()).address, owner, salt });
    if (!isAddressEqual(derived, address)) throw walletNotOwned();
    deployed = await hasCode(publicClient(chain), address);
  } else {
    const account = await accountOwner(publicClient(chain), address);
    if (!account.deployed || !account.owner || !isAddressEqual(account.owner, owner)) throw walletNotOwned();
    deployed = true;
  }
  const signable: SignableWallet = Object.freeze({ chainId: chain.chainId, address, owner, factory, salt, known, deployed });
  verified.add(signable);
  return signable;
}

/**
 * Signs `op` with the controller. Refuses (throws) anything but an operation of the verified wallet: another
 * sender, or init code other than the wallet's own known factory's `createAccount(owner, salt)`.
 */
export async function signWalletOperation(signable: SignableWallet, op: UserOperationV07, chain: ChainSettings): Promise<UserOperationV07> {
  if (!verified.has(signable)) throw new Error("signWalletOperation needs a wallet from verifySignable");
  if (signable.chainId !== chain.chainId) throw new Error("the wallet was verified on another chain");
  if (!isAddressEqual(op.sender, signable.address)) throw new Error("the operation's sender is not the verified wallet");
  if (op.factory !== undefined || op.factoryData !== undefined) {
    const ownInitCode =
      signable.known &&
      op.factory !== undefined &&
      isAddressEqual(op.factory, signable.factory) &&
      op.factoryData?.toLowerCase() === controlledAccount.factoryData(signable.owner, signable.salt).toLowerCase();
    if (!ownInitCode) throw new Error("init code is only signed for the wallet's own known factory");
  }
  return controlledAccount.sign({
    userOp: op,
    signer: await controllerSigner(),
    chainId: chain.chainId,
    entryPoint: getAddress(chain.entryPoint),
  });
}
