/**
 * User operations from a registered wallet: the sender of workflow runs (the engine's SendCalls port, API.md
 * §8.4.1-8.4.2, §10.2) and the building and sending steps it shares with withdrawals (§11.5). Every operation is
 * built for an account verified as its owner's (§11.3), sponsored by the chain's paymaster when there is one and the
 * owner's and the chain's sponsored-gas budgets take it (§18.5, sponsorship.ts; else paid by the wallet), and sent
 * under a nonce key of its own, derived from its identity (API.md §19, ../chain/nonce.ts): operations of one wallet
 * travel side by side, none waits for another's receipt, and an undeployed account is deployed by one of them while
 * the others wait for its code (deployment.ts).
 */
import { ulid } from "ulid";
import { ApiError } from "../errors";
import { BaseError, decodeErrorResult, getAddress, toHex, type Address, type Hex, type PublicClient, type StateOverride } from "viem";
import { entryPoint07Abi, type BundlerClient, type UserOperationReceipt } from "viem/account-abstraction";
import { bundlerClient, controllerSigner, publicClient } from "../chain/chains";
import { composeNonce, nonceKeyOf, splitNonce, stepIdentity } from "../chain/nonce";
import { signWalletOperation, verifySignable, type SignableWallet } from "./signing";
import { DeploymentPending, deploymentTurn, untilDeployed, type DeploymentTurn } from "./deployment";
import { bundlerRefusal, bundlerRejection, follow, isDeploymentConflict, sendOnce, type SendAnswer } from "./delivery";
import { get as getWallet, type WalletRecord } from "./wallet";
import { maySponsor, reserveSponsoredGas, sponsoredGasOf, type Sponsorship } from "./sponsorship";
import type { SendCalls, SendOutcome, WalletCall } from "./send";
import type { ChainSettings } from "../config";
import { useConfig } from "../current-runtime";
import { buildUserOperation, getUserOperationFees, type AccountCall } from "../chain/userop-account";
import { estimateUserOperationGas } from "../chain/userop-bundler";
import { getUserOperationHashV07, type UserOperationV07 } from "../chain/userop-signer";
import { sponsorUserOperation, withVerifyingPaymasterStub } from "../chain/userop-paymaster";

export const insufficientBalance = (message = "The wallet's balance is below the amount to withdraw.") =>
  new ApiError(400, "INSUFFICIENT_BALANCE", message);

// ---------------------------------------------------------------------------------------------
// Building (shared with withdrawals)

interface OperationPlan {
  /** The account calls for the value `amount` resolves to (only `max` changes it). */
  calls: (amount: bigint) => AccountCall[];
  /** A fixed amount (also the value estimated with), or "max": the wallet's whole spendable native balance. */
  amount: bigint | "max";
  /** Caps the operation's callGasLimit. */
  gasLimit?: bigint;
}

interface PreparedOperation {
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

/** The operation's nonce was used already: an operation with its identity was included before (nothing is built). */
class NonceUsed extends Error {
  constructor(readonly nonce: bigint) {
    super(`nonce key ${toHex(splitNonce(nonce).key)} of this operation was used already: an operation with its identity was included`);
  }
}

/**
 * Builds the signed operation: init code while the account is undeployed, under `nonce` (the operation's own key,
 * sequence 0; with `mayBeUsed`, NonceUsed when the chain has used it already), gas from the bundler, the paymaster's
 * sponsorship when the chain has one and the owner's and the chain's budgets (API.md §18.5, sponsorship.ts) take the
 * operation's gas limits. Past a budget it is built unsponsored, paid by the
 * wallet: a wallet that cannot pay it is refused here (400 INSUFFICIENT_BALANCE, nothing sent). `max` is resolved
 * here: the whole balance when sponsored, else the balance minus the operation's maximum gas cost (its prefund less
 * the deposit the account already holds at the EntryPoint). Throws the bundler's refusals (see bundlerRejection).
 */
async function prepareOperation(
  client: PublicClient,
  bundler: BundlerClient,
  wallet: SignableWallet,
  chain: ChainSettings,
  plan: OperationPlan,
  nonce: { value: bigint; mayBeUsed: boolean },
): Promise<PreparedOperation> {
  const building = await startBuilding(client, bundler, wallet, chain, plan, nonce);
  const { built, sponsorship } = await sponsoredOrPaid(building);
  try {
    return await signOperation(building, built, sponsorship);
  } catch (err) {
    await sponsorship?.giveBack();
    throw err;
  }
}

/** What the steps that build one operation share: the chain's clients and contracts, the wallet, the plan and what was read first. */
interface Building {
  client: PublicClient;
  bundler: BundlerClient;
  wallet: SignableWallet;
  chain: ChainSettings;
  plan: OperationPlan;
  entryPoint: Address;
  paymaster: Address | undefined;
  nonce: bigint;
  fees: Awaited<ReturnType<typeof getUserOperationFees>>;
  /** The wallet's balance, read at once when the plan sends the whole of it. */
  maxBalance: bigint | undefined;
}

/** Gas limits, the wallet's own gas funds, the amount and the balance they were decided on. */
type Estimate = Awaited<ReturnType<typeof estimateOperation>>;

/** Reads the nonce's use, the fees and (for `max`) the balance; NonceUsed when the chain has used the nonce already. */
async function startBuilding(
  client: PublicClient,
  bundler: BundlerClient,
  wallet: SignableWallet,
  chain: ChainSettings,
  plan: OperationPlan,
  nonce: { value: bigint; mayBeUsed: boolean },
): Promise<Building> {
  const entryPoint = getAddress(chain.entryPoint);
  const paymaster = chain.paymaster ? getAddress(chain.paymaster) : undefined;
  const [chainNonce, fees, maxBalance] = await Promise.all([
    // the key's next nonce: past ours when an operation under our key was included (no read for a key that is new by
    // construction, nor for an account without code: every key of it is at sequence 0)
    nonce.mayBeUsed && wallet.deployed
      ? client.readContract({
          address: entryPoint,
          abi: entryPoint07Abi,
          functionName: "getNonce",
          args: [wallet.address, splitNonce(nonce.value).key],
        })
      : Promise.resolve(nonce.value),
    getUserOperationFees({ client, bundler }),
    plan.amount === "max" ? client.getBalance({ address: wallet.address }) : Promise.resolve(undefined),
  ]);
  if (chainNonce > nonce.value) throw new NonceUsed(nonce.value);
  return { client, bundler, wallet, chain, plan, entryPoint, paymaster, nonce: nonce.value, fees, maxBalance };
}

/** The unsigned operation for the plan's calls with `value`, without gas limits. */
function unsignedOperation({ client, entryPoint, wallet, plan, nonce, fees }: Building, value: bigint) {
  return buildUserOperation({
    client,
    entryPoint,
    factory: wallet.factory,
    owner: wallet.owner,
    salt: wallet.salt,
    sender: wallet.address,
    calls: plan.calls(value),
    nonce,
    // verifySignable answers deployed for every factory that is not known: init code only for known ones
    deployed: wallet.deployed,
    fees,
  });
}

/** Gas limits, the wallet's own gas funds and the amount, for the operation sponsored by `by` or paid by the wallet. */
async function estimateOperation(building: Building, by: Address | undefined) {
  const { client, bundler, wallet, plan, entryPoint, paymaster, fees, maxBalance } = building;
  const [balance, deposit] = await Promise.all([
    maxBalance ?? client.getBalance({ address: wallet.address }),
    by
      ? Promise.resolve(0n)
      : client.readContract({ address: entryPoint, abi: entryPoint07Abi, functionName: "balanceOf", args: [wallet.address] }),
  ]);
  // Estimate with a value of the final one's size, so calldata costs are not under-estimated; a wallet that
  // pays its own gas cannot also send its whole balance in the simulation, so it estimates with half.
  const estimateValue = plan.amount !== "max" ? plan.amount : by ? balance : balance / 2n;
  let op = await unsignedOperation(building, estimateValue);
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
}

/**
 * The estimate the operation is built on: sponsored when the chain has a paymaster and both budgets take the
 * operation's gas limits (their reservation returned with it), else paid by the wallet, which must afford it.
 */
async function sponsoredOrPaid(building: Building): Promise<{ built: Estimate; sponsorship?: Sponsorship }> {
  const { wallet, chain, plan, paymaster } = building;
  if (paymaster && maySponsor()) {
    const built = await estimateOperation(building, paymaster);
    const sponsorship = await reserveSponsoredGas({ chainId: chain.chainId, owner: wallet.owner, gas: sponsoredGasOf(built.gas) });
    if (sponsorship) return { built, sponsorship };
  }
  // Paid by the wallet. With a paymaster on the chain that means past a budget (API.md §18.5): a wallet that
  // cannot pay is then refused before anything is sent.
  const pastBudget = paymaster !== undefined;
  let built: Estimate;
  try {
    built = await estimateOperation(building, undefined);
  } catch (err) {
    const refusal = bundlerRefusal(err);
    if (pastBudget && refusal && prefundUnpaid(refusal.message)) throw cannotPay(wallet);
    throw err;
  }
  if (pastBudget) {
    const value = plan.calls(built.amount).reduce((sum, c) => sum + (c.value ?? 0n), 0n);
    if (value + built.gasFunds > built.balance) throw cannotPay(wallet, built.balance, value, built.gasFunds);
  }
  return { built };
}

/** The operation built on `built`: with the paymaster's signed sponsorship when `sponsorship`, then signed for the wallet. */
async function signOperation(building: Building, built: Estimate, sponsorship: Sponsorship | undefined): Promise<PreparedOperation> {
  const { wallet, chain, paymaster } = building;
  const { gas, gasFunds, amount } = built;
  let op: UserOperationV07 = { ...(await unsignedOperation(building, amount)), ...gas };
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
// Sending (shared with withdrawals)

/** Attempts at building an operation whose init code became obsolete (another operation deployed the account). */
const DEPLOYMENT_ATTEMPTS = 3;
/** How long a refused deploying operation waits for the other operation's deployment before building again. */
const DEPLOYMENT_CONFLICT_WAIT_MS = 30_000;

export interface Dispatch {
  record: WalletRecord;
  chain: ChainSettings;
  client: PublicClient;
  bundler: BundlerClient;
  /** The wallet as verified by the caller (verified again when built a second time). */
  signable: SignableWallet;
  /**
   * The operation's nonce: its own key, sequence 0 (../chain/nonce.ts); `mayBeUsed` when its identity may have sent
   * before (a step: checked on chain first), not for a key new by construction (a new withdrawal's).
   */
  nonce: { value: bigint; mayBeUsed: boolean };
  /** The plan for the verified wallet, after the caller's checks (which may throw to refuse). */
  plan(signable: SignableWallet): Promise<OperationPlan>;
  /** Called with the signed operation before it is sent (a withdrawal records it); throwing sends nothing. */
  beforeSend?(prepared: PreparedOperation, userOpHash: Hex): Promise<void>;
}

/** What became of a dispatched operation: refused by the bundler when sent, or sent (accepted, its answer lost, or deferred). */
export type Dispatched =
  | { sent: false; refusal: string; prepared: PreparedOperation }
  | { sent: true; answer: Exclude<SendAnswer, { refused: string }>; prepared: PreparedOperation; userOpHash: Hex; turn: DeploymentTurn };

/**
 * Builds and sends one operation under its own nonce: waits for the account's deployment turn when it has no code
 * (deployment.ts), builds, calls `beforeSend`, sends once. An operation whose init code turns out obsolete (the
 * bundler refuses it for another operation's deployment, AA10) is built again without it once the account has
 * code. Throws what building throws (bundler refusals while estimating, NonceUsed, 400s, transport failures); a
 * refusal of the send itself is answered, with the sponsorship given back and the turn ended. A sent operation's
 * turn is the caller's to end once its fate is known.
 */
export async function dispatch(d: Dispatch): Promise<Dispatched> {
  const entryPoint = getAddress(d.chain.entryPoint);
  let signable = d.signable;
  for (let attempt = 1; ; attempt++) {
    const turn = await deploymentTurn(d.client, signable); // at once for a deployed account
    if (!turn.deploys && !signable.deployed) signable = await verifySignable(d.record, d.chain);
    const built = await buildAndSend(d, signable, turn, entryPoint, attempt);
    if (built !== "again") return built;
    await untilDeployed(d.client, signable, Date.now() + DEPLOYMENT_CONFLICT_WAIT_MS);
    signable = await verifySignable(d.record, d.chain);
  }
}

async function buildAndSend(
  d: Dispatch,
  signable: SignableWallet,
  turn: DeploymentTurn,
  entryPoint: Address,
  attempt: number,
): Promise<Dispatched | "again"> {
  let prepared: PreparedOperation;
  try {
    prepared = await prepareOperation(d.client, d.bundler, signable, d.chain, await d.plan(signable), d.nonce);
  } catch (err) {
    await turn.end("not-sent");
    const refusal = bundlerRefusal(err);
    if (refusal && isDeploymentConflict(refusal.message) && attempt < DEPLOYMENT_ATTEMPTS) return "again";
    throw err;
  }
  const userOpHash = getUserOperationHashV07(prepared.op, { chainId: d.chain.chainId, entryPoint });
  try {
    await d.beforeSend?.(prepared, userOpHash);
  } catch (err) {
    await prepared.giveBack();
    await turn.end("not-sent");
    throw err;
  }
  const answer = await sendOnce(d.bundler, prepared.op, entryPoint);
  if ("refused" in answer) {
    // Never sent: its sponsored gas goes back (a new attempt reserves again).
    await prepared.giveBack();
    await turn.end("not-sent");
    if (isDeploymentConflict(answer.refused) && attempt < DEPLOYMENT_ATTEMPTS) return "again";
    return { sent: false, refusal: answer.refused, prepared };
  }
  return { sent: true, answer, prepared, userOpHash, turn };
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
 *
 * Each operation's nonce key comes from its identity (API.md §19): `executionId` with the request's `nodeId` and
 * `iteration`, so the same step never sends a second operation (a repeat finds its nonce used, or its operation in
 * the bundler's mempool, and sends nothing); a request without them gets a key of its own (a fresh id).
 */
export function walletSender({ owner, wallet, executionId }: { owner: Address; wallet: Address; executionId?: string }): SendCalls {
  return async ({ chainId, calls, sendMax, gasLimit, nodeId, iteration }) => {
    if (calls.length === 0) throw new Error("a user operation needs at least one call");
    if (sendMax && calls.length !== 1) throw new Error("sendMax applies to a single call");
    const chain = useConfig().chains.find((c) => c.chainId === chainId);
    if (!chain?.bundlerUrl) return failure("RPC_ERROR", `chain ${chainId} has no bundler configured: user operations cannot be sent on it`);
    const identity = executionId !== undefined && nodeId !== undefined ? stepIdentity(executionId, nodeId, iteration) : `call/${ulid()}`;
    try {
      const record = await getWallet(owner, chainId, wallet);
      if (!record)
        return failure("WALLET_NOT_OWNED", `the runner ${getAddress(wallet)} is not a wallet of the workflow's owner on chain ${chainId}`);
      return await send(record, chain, { calls, sendMax, gasLimit }, { value: composeNonce(nonceKeyOf(identity)), mayBeUsed: true });
    } catch (err) {
      return outcomeOf(err);
    }
  };
}

/** A refusal before anything was sent, as a step outcome. */
function outcomeOf(err: unknown): Failure {
  if (err instanceof NonceUsed) return failure("USEROP_REJECTED", `${err.message}: nothing was sent again`);
  if (err instanceof ApiError) {
    if (err.code === "WALLET_NOT_OWNED")
      return failure(
        "WALLET_NOT_OWNED",
        "the runner wallet's account is not provably the workflow owner's (API.md §11.3): nothing was signed",
      );
    if (err.code === "INSUFFICIENT_BALANCE") return failure("INSUFFICIENT_BALANCE", err.message);
    if (err instanceof DeploymentPending) return failure("RPC_ERROR", err.message);
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
  nonce: { value: bigint; mayBeUsed: boolean },
): Promise<SendOutcome> {
  const client = publicClient(chain);
  const bundler = bundlerClient(chain);
  const entryPoint = getAddress(chain.entryPoint);
  const calls: AccountCall[] = request.calls.map((c) => ({ to: getAddress(c.to), value: c.value ?? 0n, data: c.data ?? "0x" }));
  const value = calls.reduce((sum, c) => sum + (c.value ?? 0n), 0n);
  let balance = 0n;

  let dispatched: Dispatched;
  try {
    dispatched = await dispatch({
      record,
      chain,
      client,
      bundler,
      signable: await verifySignable(record, chain),
      nonce,
      plan: async (signable) => {
        balance = await client.getBalance({ address: signable.address });
        if (request.sendMax ? balance === 0n : value > balance) {
          throw insufficientBalance(
            `The wallet holds ${balance} wei; the operation sends ${request.sendMax ? "its whole balance" : `${value} wei`}.`,
          );
        }
        return request.sendMax
          ? { calls: (amount) => [{ ...calls[0]!, value: amount }], amount: "max", gasLimit: request.gasLimit }
          : { calls: () => calls, amount: value, gasLimit: request.gasLimit };
      },
      beforeSend: async ({ gasFunds }) => {
        if (!request.sendMax && value + gasFunds > balance) {
          throw insufficientBalance(
            `The wallet holds ${balance} wei; the operation sends ${value} wei and may cost up to ${gasFunds} wei of gas.`,
          );
        }
      },
    });
  } catch (err) {
    const refusal = bundlerRefusal(err);
    if (refusal === undefined) throw err;
    // Found while estimating: nothing is sent, no gas is spent on an operation known to revert.
    if (executionReverted(refusal)) return failure("USEROP_REVERTED", `user operation reverted: ${readableReason(refusal.message)}`);
    if (prefundUnpaid(refusal.message) && !chain.paymaster) {
      throw insufficientBalance(
        `The wallet holds ${balance} wei; it cannot pay the operation's gas${value ? ` on top of the ${value} wei it sends` : ""}.`,
      );
    }
    return failure("USEROP_REJECTED", refusal.message);
  }
  if (!dispatched.sent) return failure("USEROP_REJECTED", dispatched.refusal);

  const { prepared, userOpHash, turn, answer } = dispatched;
  const { useropReceiptWaitMs } = useConfig().limits;
  // A lost answer, or a bundler deferring it: the very same operation is sent again until taken (delivery.ts).
  const followed = await follow({
    client,
    bundler,
    entryPoint,
    op: prepared.op,
    hash: userOpHash,
    waitMs: useropReceiptWaitMs,
    first: answer,
  });
  if ("receipt" in followed) {
    await turn.end("included");
    return settled(followed.receipt, userOpHash, Boolean(prepared.op.factory));
  }
  if ("refused" in followed || !followed.taken) {
    // never in: nothing can land later
    await prepared.giveBack();
    await turn.end("not-sent");
    const message = "refused" in followed ? followed.refused : `the bundler did not take the operation: ${followed.deferred}`;
    return failure("USEROP_REJECTED", message);
  }
  await turn.end("unknown");
  return "lost" in answer
    ? failure("RPC_ERROR", "the bundler could not be reached while sending; the operation may still be included", { userOpHash })
    : failure("USEROP_TIMEOUT", `no receipt for user operation ${userOpHash} within ${useropReceiptWaitMs} ms`, { userOpHash });
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
