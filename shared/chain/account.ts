/**
 * Account kinds: how a smart wallet's address is derived, how it is deployed (init code), how calls are
 * encoded and how an operation is signed. One kind today (ControlledAccount: owner or service controller
 * may sign); an ERC-6900 modular account would be a second `AccountKind`, chosen by factory.
 */
import { encodeFunctionData, erc20Abi, getContractAddress, type Address, type Hex, type PublicClient } from "viem";
import { controlledAccountAbi } from "./solidity/artifacts";
import { encodeAccountCalls, encodeCreateAccount, getAccountAddress, predictAccountAddress, type AccountCall } from "./userop-account";
import { signUserOperation, type DigestSigner, type UserOperationV07 } from "./userop-signer";

export interface AccountKind {
  name: string;
  /** Address of (owner, salt) under a known factory (one whose accounts get `controller`), computed offline. */
  predictAddress(p: { factory: Address; controller: Address; owner: Address; salt: bigint }): Address;
  /** Any factory's own answer (its `getAddress` view): only a claim, never a reason to sign (API.md §11.3). */
  claimedAddress(p: { client: PublicClient; factory: Address; owner: Address; salt: bigint }): Promise<Address>;
  /** The owner a deployed account reports. */
  readOwner(client: PublicClient, account: Address): Promise<Address>;
  factoryData(owner: Address, salt: bigint): Hex;
  encodeCalls(calls: readonly AccountCall[]): Hex;
  sign(p: { userOp: UserOperationV07; signer: DigestSigner; chainId: number; entryPoint: Address }): Promise<UserOperationV07>;
}

export const controlledAccount: AccountKind = {
  name: "ControlledAccount",
  predictAddress({ factory, controller, owner, salt }) {
    // The factory creates its account implementation in its constructor: the factory's first CREATE.
    const implementation = getContractAddress({ from: factory, nonce: 1n });
    return predictAccountAddress({ factory, implementation, controller, owner, salt });
  },
  claimedAddress: ({ client, factory, owner, salt }) => getAccountAddress(client, { factory, owner, salt }),
  readOwner: (client, account) => client.readContract({ address: account, abi: controlledAccountAbi, functionName: "owner" }),
  factoryData: encodeCreateAccount,
  encodeCalls: encodeAccountCalls,
  sign: ({ userOp, signer, chainId, entryPoint }) => signUserOperation({ userOp, signer, chainId, entryPoint }),
};

/** ERC-20 `transfer(recipient, amount)` calldata. */
export const erc20Transfer = (recipient: Address, amount: bigint): Hex =>
  encodeFunctionData({
    abi: erc20Abi,
    functionName: "transfer",
    args: [recipient, amount],
  });
