/**
 * Withdrawals (API.md §11.5, §11.6): ETH or an ERC-20 out of a smart wallet as one user operation,
 * signed by the service's controller, sponsored by the chain's paymaster when configured and within the
 * sponsored-gas budgets (API.md §18.5; else paid by the wallet), under a nonce key derived from the withdrawal's id
 * (API.md §19: withdrawals of one wallet travel side by side), recorded with the signed operation before it is sent,
 * sent to the chain's bundler, and followed until a receipt (or the 30-minute give-up): a lost answer is followed
 * by sending the very same operation again (delivery.ts), never a second one.
 */
import { ulid } from "ulid";
import { BaseError, erc20Abi, getAddress, toHex, type Address, type PublicClient } from "viem";
import { ApiError, notFound } from "../errors";
import { useOwner } from "../context";
import { log } from "../log";
import { useConfig, useRuntime } from "../runtime";
import { listWithdrawals as storedWithdrawals, withdrawalPosition as position } from "../store/entities/withdrawal";
import type { Status } from "./schemas";
import { bundlerClient, contractRefused, publicClient, unsupportedChain } from "../chain/chains";
import { erc20Transfer } from "../chain/account";
import type { AccountCall } from "../chain/userop";
import { composeNonce, nonceKeyOf, withdrawalIdentity } from "../chain/nonce";
import { upstreamError } from "../chain/upstream";
import * as Idempotency from "../store/idempotency";
import { requireOwned, type WalletRecord } from "./wallet";
import { verifySignable } from "./signing";
import { dispatch, insufficientBalance, type Dispatched } from "./operation";
import { bundlerRejection, follow, storeOperation, type Followed } from "./delivery";
import type { ChainSettings } from "../config";
import { ETH, fieldError, parseRequest, type Request, type Result, type StoredWithdrawal } from "./withdraw-request";
import { getStored, record, settle, settleFollowed } from "./withdraw-records";
import { refresh } from "./withdraw-followup";

export { type Result } from "./withdraw-request";
export { followUpPending } from "./withdraw-followup";

// ---------------------------------------------------------------------------------------------
// Withdraw

export async function withdraw(
  walletPath: string,
  body: Record<string, unknown>,
  idempotencyKey: string | undefined,
): Promise<{ result: Result; replayed: boolean }> {
  const request = parseRequest(walletPath, body);
  const { wallet, chain } = await requireOwned(walletPath, request.chainId);
  if (!chain.bundlerUrl) throw unsupportedChain(chain.chainId);
  const owner = useOwner();
  const scope = `withdraw#${chain.chainId}#${wallet.address.toLowerCase()}`;

  if (idempotencyKey) {
    const claim = await Idempotency.claim(owner, scope, idempotencyKey, Idempotency.bodyFingerprint(body));
    if (claim.kind === "replay") {
      const stored = await getStored(owner, chain.chainId, wallet.address, String(claim.outcome.withdrawalId));
      if (!stored) throw new Error("idempotency record points at a missing withdrawal");
      return { result: await refresh(stored, chain), replayed: true };
    }
  }
  try {
    const result = await send(wallet, chain, request);
    if (idempotencyKey) await Idempotency.complete(owner, scope, idempotencyKey, { withdrawalId: result.id });
    return { result, replayed: false };
  } catch (err) {
    // Nothing was sent: the key is not remembered (a preflight 400, an unreachable RPC).
    if (idempotencyKey) await Idempotency.release(owner, scope, idempotencyKey);
    throw err;
  }
}

/**
 * Preflight, build, sign, record and send one withdrawal under its own nonce key (the first 192 bits of its id's
 * hash, sequence 0), side by side with the wallet's other operations; an undeployed account is deployed by one of
 * them, the others waiting for its code (deployment.ts).
 */
async function send(wallet: WalletRecord, chain: ChainSettings, request: Request): Promise<Result> {
  const client = publicClient(chain);
  const bundler = bundlerClient(chain);
  const signable = await verifySignable(wallet, chain);
  const { amount, balance, call } = await preflight(client, wallet, request);

  const id = ulid();
  const nonceKey = nonceKeyOf(withdrawalIdentity(id));
  const base = {
    id,
    chainId: chain.chainId,
    smartWalletAddress: getAddress(wallet.address),
    recipientAddress: request.recipient,
    token: request.token,
    owner: wallet.owner,
  };
  let submitted: Result | undefined;
  let dispatched: Dispatched;
  try {
    dispatched = await dispatch({
      record: wallet,
      chain,
      client,
      bundler,
      signable,
      nonce: { value: composeNonce(nonceKey), mayBeUsed: false }, // a new id: nothing can have used its key
      plan: async () => ({ calls: (value) => [call(value)], amount }),
      // Stored before it is sent: whatever happens next (a lost answer, a crash), the follow-up knows the
      // operation and can send the very same one again.
      beforeSend: async ({ op, amount: finalAmount }, userOpHash) => {
        submitted = await record({
          ...base,
          status: "pending",
          userOpHash,
          amount: finalAmount.toString(),
          submittedAt: useRuntime().now(),
          nonceKey: toHex(nonceKey),
          userOp: storeOperation(op),
        });
      },
    });
  } catch (err) {
    const rejection = bundlerRejection(err);
    // the chain or the bundler unusable: 503/502; our own failures (the table) as they are
    if (rejection === undefined) throw err instanceof BaseError ? upstreamError(err) : err;
    return record({
      ...base,
      status: "failed",
      message: rejection,
      amount: String(amount === "max" ? balance : amount),
      submittedAt: useRuntime().now(),
    });
  }
  if (!dispatched.sent) return settle(submitted!, { status: "failed", message: dispatched.refusal, userOpHash: undefined });

  const { prepared, userOpHash, turn, answer } = dispatched;
  const { withdrawConfirmWaitMs, useropReceiptWaitMs } = useConfig().limits;
  // Followed in the background past the answer (up to the user-operation receipt wait): the outcome is stored as
  // soon as it is known, and the account's deployment turn ended with it.
  const followed: Promise<Followed> = follow({
    client,
    bundler,
    entryPoint: getAddress(chain.entryPoint),
    op: prepared.op,
    hash: userOpHash,
    waitMs: Math.max(withdrawConfirmWaitMs, useropReceiptWaitMs),
    first: answer,
  }).catch((): Followed => ({ timedOut: true, taken: true }));
  const pending = submitted!;
  const outcome = followed
    .then(async (f) => {
      if ("refused" in f) await prepared.giveBack();
      // not taken in time (deferred all along): still pending, the follow-up sends it again, so its turn is kept
      await turn.end("receipt" in f ? "included" : "refused" in f ? "not-sent" : "unknown");
      return settleFollowed(pending, f);
    })
    .catch((err: unknown) => {
      log.warn("a withdrawal's outcome could not be stored; the follow-up will", { id: pending.id, error: (err as Error).message });
      return pending;
    });
  return answerWithin(outcome, withdrawConfirmWaitMs, pending);
}

/** The stored outcome once known within `waitMs`, else the withdrawal as submitted (pending). */
async function answerWithin(outcome: Promise<Result>, waitMs: number, submitted: Result): Promise<Result> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, waitMs, undefined)));
  const settled = await Promise.race([outcome, timeout]);
  clearTimeout(timer);
  return settled ?? submitted;
}

/** Token code, balance, and the account call (API.md §11.5 checks after the wallet lookup). */
async function preflight(client: PublicClient, wallet: WalletRecord, request: Request) {
  try {
    if (request.token === ETH) {
      const balance = await client.getBalance({ address: wallet.address });
      const amount = request.amount === "max" ? balance : request.amount;
      if (balance === 0n || balance < amount) throw insufficient();
      return { amount: request.amount, balance, call: (value: bigint): AccountCall => ({ to: request.recipient, value }) };
    }
    const token = request.token;
    const code = await client.getCode({ address: token });
    if (!code || code === "0x") throw badToken("has no contract code on this chain");
    const balance = await client
      .readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [wallet.address] })
      .catch((err: unknown) => {
        throw contractRefused(err) ? badToken("is not an ERC-20 contract (balanceOf failed)") : err;
      });
    const amount = request.amount === "max" ? balance : request.amount;
    if (balance === 0n || balance < amount) throw insufficient();
    return { amount, balance, call: (value: bigint): AccountCall => ({ to: token, data: erc20Transfer(request.recipient, value) }) };
  } catch (err) {
    throw err instanceof ApiError ? err : upstreamError(err);
  }
}

const badToken = (message: string) => fieldError("WITHDRAW_BAD_TOKEN", "body.token", message);
const insufficient = () => insufficientBalance();

export type { Status };

export async function listWithdrawals(
  walletPath: string,
  chainId: number | undefined,
  statuses: Status[],
  page: { limit: number; after?: string; before?: string },
) {
  const { wallet, chain } = await requireOwned(walletPath, chainId);
  const owner = useOwner();
  const result = await storedWithdrawals(owner, chain.chainId, wallet.address, statuses, page);
  const refreshed = await Promise.all(result.items.map((item) => refresh(item as unknown as StoredWithdrawal, chain)));
  return { result: { ...result, items: refreshed as unknown as Record<string, unknown>[] }, chain, wallet };
}

export async function getWithdrawal(walletPath: string, chainId: number | undefined, id: string): Promise<Result> {
  const { wallet, chain } = await requireOwned(walletPath, chainId);
  const normalized = id.toUpperCase();
  const stored = /^[0-9A-HJKMNP-TV-Z]{26}$/.test(normalized)
    ? await getStored(useOwner(), chain.chainId, wallet.address, normalized)
    : undefined;
  if (!stored) throw notFound("WITHDRAWAL_NOT_FOUND", "The withdrawal");
  return refresh(stored, chain);
}

/** Sort-key position of a withdrawal, for cursors. */
export const withdrawalPosition = (chainId: number, wallet: Address, id: string) => position(chainId, wallet, id);
