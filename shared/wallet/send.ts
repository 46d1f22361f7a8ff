/**
 * Sending user operations from a wallet, as the engine asks for it (its SendCalls port, shared/engine/types.ts):
 * the request, its calls and the outcome. Implemented by ./operation.ts (walletSender); types only.
 */
import type { Address, Hex } from "viem";

/** One call of a user operation: `to` with `value` wei and call data. */
export interface WalletCall {
  to: Address;
  value?: bigint;
  data?: Hex;
}

/** The outcome of one user operation sent from the runner (API.md §8.4.1-8.4.2, §9.6, §10.2). */
export type SendOutcome =
  | {
      ok: true;
      userOpHash: Hex;
      transactionHash: Hex;
      blockNumber: bigint;
      gasUsed: bigint;
      /** totalGasCost / gasUsed, rounded down. */
      gasPrice: bigint;
      totalGasCost: bigint;
      /** Whether this operation deployed the account (its init code ran). */
      deployed: boolean;
      /** With `sendMax`: the wei amount actually sent. */
      value?: bigint;
    }
  | {
      ok: false;
      /** USEROP_REJECTED, USEROP_REVERTED (then hashes and gas are set), USEROP_TIMEOUT (userOpHash set), INSUFFICIENT_BALANCE, RPC_ERROR, WALLET_NOT_OWNED. */
      errorCode: "USEROP_REJECTED" | "USEROP_REVERTED" | "USEROP_TIMEOUT" | "INSUFFICIENT_BALANCE" | "RPC_ERROR" | "WALLET_NOT_OWNED";
      error: string;
      userOpHash?: Hex;
      transactionHash?: Hex;
      blockNumber?: bigint;
      gasUsed?: bigint;
      gasPrice?: bigint;
      totalGasCost?: bigint;
    };

/**
 * Sends `calls` as ONE user operation from the run's wallet on `chainId` (several calls are batched: all succeed
 * or all revert). Implementations verify ownership through shared/wallet/signing.ts before signing anything, send
 * each operation under a nonce key of its own (API.md §19: the wallet's operations travel side by side; the key
 * comes from the execution, `nodeId` and `iteration`, so one step never sends two operations), and wait for the
 * receipt up to `userop_receipt_wait_ms`: the engine keeps one path's order by sending a node's operation only
 * after the previous node's answer.
 * `amount: "max"` of ethTransfer is resolved by the sender (the balance, minus the maximum gas cost when the
 * wallet pays its own gas): pass `sendMax` instead of a value for that single call.
 */
export type SendCalls = (request: {
  chainId: number;
  calls: WalletCall[];
  /** ethTransfer `max`: send the whole spendable balance to calls[0].to. */
  sendMax?: boolean;
  /** contractWrite `gasLimit`: caps the operation's call gas. */
  gasLimit?: bigint;
  /** The node whose operation this is: with the sender's execution, the operation's identity (its nonce key). */
  nodeId?: string;
  /** Inside a loop: the iteration (0-based) whose operation this is. */
  iteration?: number;
}) => Promise<SendOutcome>;
