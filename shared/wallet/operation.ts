/**
 * User operations from a registered wallet: the sender of workflow runs (the engine's SendCalls port, API.md
 * §8.4.1-8.4.2, §10.2) and the building step it shares with withdrawals (§11.5). Every operation is built for an
 * account verified as its owner's (§11.3), sponsored by the chain's paymaster when there is one and the owner's and
 * the chain's sponsored-gas budgets take it (§18.5, sponsorship.ts; else paid by the wallet), and sent under the
 * wallet's nonce lock, so concurrent steps and withdrawals of one wallet take consecutive nonces.
 */
import { ApiError } from "../errors";
import {
  BaseError,
  RpcRequestError,
  decodeErrorResult,
  getAddress,
  type Address,
  type Hex,
  type PublicClient,
  type StateOverride,
} from "viem";
import { entryPoint07Abi, type BundlerClient, type UserOperationReceipt } from "viem/account-abstraction";
import { useConfig } from "../runtime";
import { bundlerClient, controllerSigner, publicClient } from "../chain/chains";
import {
  buildUserOperation,
  estimateUserOperationGas,
  getUserOperationFees,
  getUserOperationHashV07,
  sponsorUserOperation,
  withVerifyingPaymasterStub,
  type AccountCall,
  type UserOperationV07,
} from "../chain/userop";
import { forgetNonce, isStaleNonce, markNonceUsed, nextNonce, withWalletLock } from "../chain/nonce";
import { signWalletOperation, verifySignable, type SignableWallet } from "./signing";
import { get as getWallet, type WalletRecord } from "./wallet";
import { maySponsor, reserveSponsoredGas, sponsoredGasOf, type Sponsorship } from "./sponsorship";
import type { SendCalls, SendOutcome, WalletCall } from "./send";
import type { ChainSettings } from "../config";

export const insufficientBalance = (message = "The wallet's balance is below the amount to withdraw.") =>
  new ApiError(400, "INSUFFICIENT_BALANCE", message);

/** The key of a wallet's nonce lock: one per (chain, account). */
export const walletLockKey = (chainId: number, address: Address) => `${chainId}:${getAddress(address)}`;

// ---------------------------------------------------------------------------------------------
// Building (shared with withdrawals)

export interface OperationPlan {
  /** The account calls for the value `amount` resolves to (only `max` changes it). */
  calls: (amount: bigint) => AccountCall[];
  /** A fixed amount (also the value estimated with), or "max": the wallet's whole spendable native balance. */
  amount: bigint | "max";
  /** Caps the operation's callGasLimit. */
  gasLimit?: bigint;
}

export interface PreparedOperation {
  op: UserOperationV07;
  /** The amount sent: `plan.amount`, or "max" resolved. */
  amount: bigint;
  /** What the wallet itself pays the EntryPoint for gas at most (0 when sponsored): its prefund less its deposit. */
  gasFunds: bigint;
  /** True when the chain's paymaster sponsors the operation (within the budgets of API.md §18.5). */
  sponsored: boolean;
  /**
   * Gives the operation's sponsored gas back to the budgets: call it whenever the operation is not sent after all
   * (the bundler refused it, nothing was sent). Not after a send whose answer was lost: it may be in. No-op when
   * unsponsored; never throws.
   */
  giveBack(): Promise<void>;
}

/**
 * Builds the signed operation: init code while the account is undeployed, the next nonce of the wallet's lock,
 * gas from the bundler, the paymaster's sponsorship when the chain has one and the owner's and the chain's budgets
 * (API.md §18.5, sponsorship.ts) take the operation's gas limits. Past a budget it is built unsponsored, paid by the
 * wallet: a wallet that cannot pay it is refused here (400 INSUFFICIENT_BALANCE, nothing sent). `max` is resolved
 * here: the whole balance when sponsored, else the balance minus the operation's maximum gas cost (its prefund less
 * the deposit the account already holds at the EntryPoint). Throws the bundler's refusals (see bundlerRejection).
 */
export async function prepareOperation(
  client: PublicClient,
  bundler: BundlerClient,
  wallet: SignableWallet,
  chain: ChainSettings,
  plan: OperationPlan,
  nonceKey: string,
): Promise<PreparedOperation> {
  const entryPoint = getAddress(chain.entryPoint);
  const paymaster = chain.paymaster ? getAddress(chain.paymaster) : undefined;
  const [chainNonce, fees, maxBalance] = await Promise.all([
    client.readContract({ address: entryPoint, abi: entryPoint07Abi, functionName: "getNonce", args: [wallet.address, 0n] }),
    getUserOperationFees({ client, bundler }),
    plan.amount === "max" ? client.getBalance({ address: wallet.address }) : Promise.resolve(undefined),
  ]);
  const unsigned = (value: bigint) =>
    buildUserOperation({
      client,
      entryPoint,
      factory: wallet.factory,
      owner: wallet.owner,
      salt: wallet.salt,
      sender: wallet.address,
      calls: plan.calls(value),
      nonce: nextNonce(nonceKey, chainNonce),
      // verifySignable answers deployed for every factory that is not known: init code only for known ones
      deployed: wallet.deployed,
      fees,
    });

  /** Gas limits, the wallet's own gas funds and the amount, for the operation sponsored by `by` or paid by the wallet. */
  const estimate = async (by: Address | undefined) => {
    const [balance, deposit] = await Promise.all([
      maxBalance ?? client.getBalance({ address: wallet.address }),
      by
        ? Promise.resolve(0n)
        : client.readContract({ address: entryPoint, abi: entryPoint07Abi, functionName: "balanceOf", args: [wallet.address] }),
    ]);
    // Estimate with a value of the final one's size, so calldata costs are not under-estimated; a wallet that
    // pays its own gas cannot also send its whole balance in the simulation, so it estimates with half.
    const estimateValue = plan.amount !== "max" ? plan.amount : by ? balance : balance / 2n;
    let op = await unsigned(estimateValue);
    if (by) op = withVerifyingPaymasterStub(op, { paymaster: by });
    // The bundler simulates on its own read of the chain, which can trail ours (seen under load: a simulation
    // without funds the wallet held for us), so the simulation is given the balance read here: the decisions
    // (the callers' preflight, the one below) and the simulation see the same funds. Past a budget, the gas is
    // estimated as if the wallet could pay it: whether it can is decided below against its real balance, so a
    // wallet short of funds is refused with INSUFFICIENT_BALANCE, not by the simulation.
    const stateOverride = [{ address: wallet.address, balance: !by && paymaster ? balance + ESTIMATION_FUNDS : balance }];
    const estimated = await estimateGas(bundler, op, entryPoint, wallet.deployed, stateOverride);
    const gas = {
      callGasLimit: plan.gasLimit !== undefined && plan.gasLimit < estimated.callGasLimit ? plan.gasLimit : estimated.callGasLimit,
      verificationGasLimit: estimated.verificationGasLimit,
      preVerificationGas: estimated.preVerificationGas + estimated.preVerificationGas / 10n,
      paymasterVerificationGasLimit: by ? estimated.paymasterVerificationGasLimit : undefined,
      paymasterPostOpGasLimit: by ? estimated.paymasterPostOpGasLimit : undefined,
    };
    const prefund = (gas.callGasLimit + gas.verificationGasLimit + gas.preVerificationGas) * fees.maxFeePerGas;
    const gasFunds = by || deposit >= prefund ? 0n : prefund - deposit;
    const amount = plan.amount === "max" ? balance - gasFunds : plan.amount;
    if (plan.amount === "max" && amount <= 0n)
      throw insufficientBalance("The wallet's balance does not cover the operation's maximum gas cost.");
    return { gas, gasFunds, amount, balance };
  };

  // Sponsored when the chain has a paymaster and both budgets take the operation's gas limits.
  let built: Awaited<ReturnType<typeof estimate>> | undefined;
  let sponsorship: Sponsorship | undefined;
  if (paymaster && maySponsor()) {
    built = await estimate(paymaster);
    sponsorship = await reserveSponsoredGas({ chainId: chain.chainId, owner: wallet.owner, gas: sponsoredGasOf(built.gas) });
    if (!sponsorship) built = undefined;
  }
  if (!built) {
    // Paid by the wallet. With a paymaster on the chain that means past a budget (API.md §18.5): a wallet that
    // cannot pay is then refused before anything is sent.
    const pastBudget = paymaster !== undefined;
    try {
      built = await estimate(undefined);
    } catch (err) {
      const refusal = bundlerRefusal(err);
      if (pastBudget && refusal && prefundUnpaid(refusal.message)) throw cannotPay(wallet);
      throw err;
    }
    if (pastBudget) {
      const value = plan.calls(built.amount).reduce((sum, c) => sum + (c.value ?? 0n), 0n);
      if (value + built.gasFunds > built.balance) throw cannotPay(wallet, built.balance, value, built.gasFunds);
    }
  }

  try {
    const { gas, gasFunds, amount } = built;
    let op: UserOperationV07 = { ...(await unsigned(amount)), ...gas };
    if (sponsorship) {
      op = await sponsorUserOperation({
        userOp: { ...op, paymaster },
        paymaster: paymaster!,
        signer: await controllerSigner(),
        chainId: chain.chainId,
      });
    } else {
      delete op.paymasterVerificationGasLimit;
      delete op.paymasterPostOpGasLimit;
    }
    op = await signWalletOperation(wallet, op, chain);
    return { op, amount, gasFunds, sponsored: Boolean(sponsorship), giveBack: sponsorship ? () => sponsorship.giveBack() : async () => {} };
  } catch (err) {
    await sponsorship?.giveBack();
    throw err;
  }
}

/** 400 INSUFFICIENT_BALANCE for an operation past the sponsored-gas budgets that the wallet cannot pay itself. */
function cannotPay(wallet: SignableWallet, balance?: bigint, value?: bigint, gasFunds?: bigint): ApiError {
  const detail =
    balance === undefined ? "" : ` (it holds ${balance} wei; the operation sends ${value} wei and may cost up to ${gasFunds} wei of gas)`;
  return insufficientBalance(
    `The paymaster's sponsored-gas budget is used up, and the wallet ${wallet.address} cannot pay the operation's gas itself${detail}.`,
  );
}

/**
 * The bundler simulates against its own view of the chain, which can trail ours for a moment right after the
 * wallet's deploying operation was included (seen on Alto: about 150 ms). The account then has no code for it and
 * the simulation reverts with no data at all. So for an account we see deployed, that one refusal is asked again
 * for up to about a second before it counts; any other answer counts at once.
 */
async function estimateGas(
  bundler: BundlerClient,
  userOp: UserOperationV07,
  entryPoint: Address,
  deployed: boolean,
  stateOverride?: StateOverride,
) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await estimateUserOperationGas({ bundler, userOp, entryPoint, stateOverride });
    } catch (err) {
      const noCodeYet = deployed && /reverted during simulation with reason: 0x\.?$/.test(bundlerRejection(err)?.trim() ?? "");
      if (!noCodeYet || attempt >= BUNDLER_LAG_ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, BUNDLER_LAG_PAUSE_MS));
    }
  }
}
/** Added to the wallet's balance in a simulation that must not fail for its funds: far above any operation's cost. */
const ESTIMATION_FUNDS = 10n ** 30n;
const BUNDLER_LAG_ATTEMPTS = 8;
const BUNDLER_LAG_PAUSE_MS = 150;

/** The bundler's or paymaster's refusal message when it answered with a JSON-RPC error; undefined for transport failures. */
export function bundlerRejection(err: unknown): string | undefined {
  return bundlerRefusal(err)?.message;
}

/** The bundler's or paymaster's JSON-RPC error (message and code); undefined for transport failures. */
function bundlerRefusal(err: unknown): { message: string; code: number } | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const rpc = err.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  if (!rpc) return undefined;
  return { message: rpc.details || rpc.shortMessage, code: rpc.code };
}

/** ERC-7769 "reverted" without an EntryPoint AAxx code: the calls themselves revert (validation passed). */
const USEROP_REVERTED_CODE = -32521;
const executionReverted = (refusal: { message: string; code: number }) =>
  refusal.code === USEROP_REVERTED_CODE && !/\bAA\d\d\b/.test(refusal.message);
/** AA21: the account could not pay its prefund out of its balance. */
const prefundUnpaid = (message: string) => /\bAA21\b/.test(message);

/** A revert reason made readable: Error(string) and Panic(uint256) decoded, anything else as it came. */
function readableReason(text: string): string {
  const hex = /0x[0-9a-fA-F]*$/.exec(text.trim())?.[0] as Hex | undefined;
  if (!hex || hex === "0x") return text;
  try {
    const decoded = decodeErrorResult({ abi: [], data: hex });
    const detail = decoded.args?.length ? `${decoded.errorName}(${decoded.args.map(String).join(", ")})` : decoded.errorName;
    return decoded.errorName === "Error" ? String(decoded.args?.[0]) : detail;
  } catch {
    return hex;
  }
}

// ---------------------------------------------------------------------------------------------
// The sender of workflow runs

type Failure = Extract<SendOutcome, { ok: false }>;
const failure = (errorCode: Failure["errorCode"], error: string, extra: Partial<Failure> = {}): Failure => ({
  ok: false,
  errorCode,
  error,
  ...extra,
});

/**
 * Sends user operations from `wallet`, one of `owner`'s registered wallets, for a workflow run. Never throws for
 * what a step can fail with (API.md §10.2): an unregistered runner or an account that is not provably the owner's
 * is WALLET_NOT_OWNED with nothing sent; an unreachable RPC or bundler is RPC_ERROR; a bundler or paymaster refusal
 * is USEROP_REJECTED with its message; no receipt within `userop_receipt_wait_ms` is USEROP_TIMEOUT.
 */
export function walletSender({ owner, wallet }: { owner: Address; wallet: Address }): SendCalls {
  return async ({ chainId, calls, sendMax, gasLimit }) => {
    if (calls.length === 0) throw new Error("a user operation needs at least one call");
    if (sendMax && calls.length !== 1) throw new Error("sendMax applies to a single call");
    const chain = useConfig().chains.find((c) => c.chainId === chainId);
    if (!chain?.bundlerUrl) return failure("RPC_ERROR", `chain ${chainId} has no bundler configured: user operations cannot be sent on it`);
    try {
      const record = await getWallet(owner, chainId, wallet);
      if (!record)
        return failure("WALLET_NOT_OWNED", `the runner ${getAddress(wallet)} is not a wallet of the workflow's owner on chain ${chainId}`);
      return await withWalletLock(walletLockKey(chainId, record.address), (hold) =>
        send(record, chain, { calls, sendMax, gasLimit }, hold),
      );
    } catch (err) {
      return outcomeOf(err);
    }
  };
}

/** A refusal before anything was sent, as a step outcome. */
function outcomeOf(err: unknown): Failure {
  if (err instanceof ApiError) {
    if (err.code === "WALLET_NOT_OWNED")
      return failure(
        "WALLET_NOT_OWNED",
        "the runner wallet's account is not provably the workflow owner's (API.md §11.3): nothing was signed",
      );
    if (err.code === "INSUFFICIENT_BALANCE") return failure("INSUFFICIENT_BALANCE", err.message);
    if (err.code === "UPSTREAM_UNAVAILABLE") return failure("RPC_ERROR", "the chain RPC or bundler is unavailable");
    throw err;
  }
  if (err instanceof BaseError) return failure("RPC_ERROR", `the chain RPC or bundler failed: ${err.shortMessage}`);
  throw err;
}

interface SendRequest {
  calls: WalletCall[];
  sendMax?: boolean;
  gasLimit?: bigint;
}

async function send(
  record: WalletRecord,
  chain: ChainSettings,
  request: SendRequest,
  hold: (until: Promise<unknown>) => void,
): Promise<SendOutcome> {
  const client = publicClient(chain);
  const bundler = bundlerClient(chain);
  const nonceKey = walletLockKey(chain.chainId, record.address);
  const entryPoint = getAddress(chain.entryPoint);
  const calls: AccountCall[] = request.calls.map((c) => ({ to: getAddress(c.to), value: c.value ?? 0n, data: c.data ?? "0x" }));
  const value = calls.reduce((sum, c) => sum + (c.value ?? 0n), 0n);

  for (let attempt = 0; ; attempt++) {
    // Again on a retry: another instance took the nonce, and may have deployed the account meanwhile.
    const signable = await verifySignable(record, chain);
    const balance = await client.getBalance({ address: signable.address });
    if (request.sendMax ? balance === 0n : value > balance) {
      throw insufficientBalance(
        `The wallet holds ${balance} wei; the operation sends ${request.sendMax ? "its whole balance" : `${value} wei`}.`,
      );
    }
    const plan: OperationPlan = request.sendMax
      ? { calls: (amount) => [{ ...calls[0]!, value: amount }], amount: "max", gasLimit: request.gasLimit }
      : { calls: () => calls, amount: value, gasLimit: request.gasLimit };

    let prepared: PreparedOperation;
    try {
      prepared = await prepareOperation(client, bundler, signable, chain, plan, nonceKey);
    } catch (err) {
      const refusal = bundlerRefusal(err);
      if (refusal === undefined) throw err;
      if (isStaleNonce(refusal.message) && attempt === 0) {
        forgetNonce(nonceKey);
        continue;
      }
      // Found while estimating: nothing is sent, no gas is spent on an operation known to revert.
      if (executionReverted(refusal)) return failure("USEROP_REVERTED", `user operation reverted: ${readableReason(refusal.message)}`);
      if (prefundUnpaid(refusal.message) && !chain.paymaster) {
        throw insufficientBalance(
          `The wallet holds ${balance} wei; it cannot pay the operation's gas${value ? ` on top of the ${value} wei it sends` : ""}.`,
        );
      }
      return failure("USEROP_REJECTED", refusal.message);
    }
    const { op, gasFunds } = prepared;
    if (!request.sendMax && value + gasFunds > balance) {
      await prepared.giveBack();
      throw insufficientBalance(
        `The wallet holds ${balance} wei; the operation sends ${value} wei and may cost up to ${gasFunds} wei of gas.`,
      );
    }

    const userOpHash = getUserOperationHashV07(op, { chainId: chain.chainId, entryPoint });
    const { useropReceiptWaitMs } = useConfig().limits;
    try {
      await bundler.sendUserOperation({ ...op, entryPointAddress: entryPoint } as never);
    } catch (err) {
      const rejection = bundlerRejection(err);
      if (rejection === undefined) {
        // The answer was lost, the operation may be in: later operations of the wallet wait for it.
        markNonceUsed(nonceKey, op.nonce);
        hold(receiptOf(bundler, userOpHash, useropReceiptWaitMs));
        return failure("RPC_ERROR", "the bundler could not be reached while sending; the operation may still be included", { userOpHash });
      }
      // Refused: never sent, so its sponsored gas goes back (a retry reserves again).
      await prepared.giveBack();
      forgetNonce(nonceKey);
      if (isStaleNonce(rejection) && attempt === 0) continue;
      return failure("USEROP_REJECTED", rejection);
    }
    markNonceUsed(nonceKey, op.nonce);
    // The wallet's next operation waits for this one's inclusion, so it is built against the state this one
    // leaves (a deployed account, the next nonce).
    const included = receiptOf(bundler, userOpHash, useropReceiptWaitMs);
    hold(included);
    const receipt = await included;
    if (!receipt)
      return failure("USEROP_TIMEOUT", `no receipt for user operation ${userOpHash} within ${useropReceiptWaitMs} ms`, { userOpHash });
    return settled(receipt, userOpHash, Boolean(op.factory));
  }
}

/** The receipt, polled until `waitMs` has passed (undefined then); a bundler that cannot answer for a moment is asked again. */
async function receiptOf(bundler: BundlerClient, hash: Hex, waitMs: number): Promise<UserOperationReceipt | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await bundler.getUserOperationReceipt({ hash });
    } catch {
      // not included yet, or the bundler did not answer: ask again until the deadline
    }
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    await new Promise((resolve) => setTimeout(resolve, Math.min(200, left)));
  }
}

function settled(receipt: UserOperationReceipt, userOpHash: Hex, hadInitCode: boolean): SendOutcome {
  const gasUsed = receipt.actualGasUsed;
  const totalGasCost = receipt.actualGasCost;
  const gas = {
    userOpHash,
    transactionHash: receipt.receipt.transactionHash,
    blockNumber: receipt.receipt.blockNumber,
    gasUsed,
    totalGasCost,
    gasPrice: gasUsed === 0n ? 0n : totalGasCost / gasUsed,
  };
  if (!receipt.success) {
    const reason = receipt.reason && receipt.reason !== "0x" ? `: ${readableReason(receipt.reason)}` : "";
    return failure("USEROP_REVERTED", `user operation reverted${reason}`, gas);
  }
  return { ok: true, ...gas, deployed: hadInitCode };
}
