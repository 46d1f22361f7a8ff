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
import { listWithdrawals as storedWithdrawals, withdrawalPosition as position } from "../store/entities/withdrawal";
import type { Status } from "./schemas";
import { bundlerClient, contractRefused, publicClient, unsupportedChain } from "../chain/chains";
import { erc20Transfer } from "../chain/account";
import { composeNonce, nonceKeyOf, withdrawalIdentity } from "../chain/nonce";
import { upstreamError } from "../chain/upstream";
import * as Idempotency from "../store/idempotency";
import { requireOwned, type WalletRecord } from "./wallet";
import { verifySignable } from "./signing";
import { dispatch, insufficientBalance, type Dispatched } from "./operation";
import { bundlerRejection, follow, storeOperation, type Followed } from "./delivery";
import type { ChainSettings } from "../config";
import { ETH, fieldError, parseRequest, type Request, type Result, type StoredWithdrawal } from "./withdraw-request";
import { AlreadyRecorded, fromItem, getStored, record, settle, settleFollowed } from "./withdraw-records";
import { by, deadlinesFrom, Recording, tooLate } from "./withdraw-deadline";
import { refresh } from "./withdraw-followup";
import { useConfig, useRuntime } from "../current-runtime";
import type { AccountCall } from "../chain/userop-account";

// ---------------------------------------------------------------------------------------------
// Withdraw

export async function withdraw(
  walletPath: string,
  body: Record<string, unknown>,
  idempotencyKey: string | undefined,
  endsAt = Infinity,
): Promise<{ result: Result; replayed: boolean }> {
  const started = Date.now();
  const request = parseRequest(walletPath, body);
  const { wallet, chain } = await requireOwned(walletPath, request.chainId);
  if (!chain.bundlerUrl) throw unsupportedChain(chain.chainId);
  const owner = useOwner();
  const stored = async (id: string) => getStored(owner, chain.chainId, wallet.address, id);
  const key = idempotencyKey
    ? { owner, scope: `withdraw#${chain.chainId}#${wallet.address.toLowerCase()}`, key: idempotencyKey }
    : undefined;

  let id = ulid();
  let leaseUntil = Infinity;
  if (key) {
    const claim = await Idempotency.claim(key, {
      fingerprint: Idempotency.bodyFingerprint(body),
      operationId: id,
      // a crashed request's withdrawal: recorded (then it was or will be sent, §11.6), or never (then sent now, once)
      recover: async (withdrawalId) => ((await stored(withdrawalId)) ? { withdrawalId } : undefined),
    });
    if (claim.kind === "replay") return { result: await replayOf(stored, String(claim.outcome.withdrawalId), chain), replayed: true };
    ({ operationId: id, leaseUntil } = claim);
  }
  const deadlines = deadlinesFrom(started, endsAt);
  const recording = new Recording(deadlines.recordBy);
  try {
    const result = await send(wallet, chain, request, id, recording, deadlines.answerBy);
    if (key) await Idempotency.complete(key, id, { withdrawalId: result.id });
    return { result, replayed: false };
  } catch (err) {
    if (err instanceof AlreadyRecorded) {
      // performed by the other request holding this key (a crashed one's repeat, or the slow original)
      if (key) await Idempotency.complete(key, id, { withdrawalId: id });
      return { result: await replayOf(stored, id, chain), replayed: true };
    }
    // Nothing was sent: the key is not remembered (a preflight 400, an unreachable RPC). Once recorded it stays.
    if (key && !recording.begun) await Idempotency.release(key, leaseUntil);
    throw err;
  }
}

/** The recorded withdrawal in its current state (a pending one followed up, §11.6). */
async function replayOf(stored: (id: string) => Promise<StoredWithdrawal | undefined>, id: string, chain: ChainSettings) {
  const found = await stored(id);
  if (!found) throw new Error("idempotency record points at a missing withdrawal");
  return refresh(found, chain);
}

/**
 * Preflight, build, sign, record and send one withdrawal under its own nonce key (the first 192 bits of its id's
 * hash, sequence 0), side by side with the wallet's other operations; an undeployed account is deployed by one of
 * them, the others waiting for its code (deployment.ts). Bounded (withdraw-deadline.ts): unrecorded by `recordBy`,
 * 503 and never recorded; recorded, answered within `withdraw_confirm_wait_ms` and by `answerBy`.
 */
async function send(
  wallet: WalletRecord,
  chain: ChainSettings,
  request: Request,
  id: string,
  recording: Recording,
  answerBy: number,
): Promise<Result> {
  const outcome = deliver(wallet, chain, request, id, recording);
  outcome.catch(() => undefined); // its rejection is thrown below, or comes after a 503 that abandoned it
  const first = await by(Promise.race([outcome, recording.stored.then((): typeof RECORDED => RECORDED)]), recording.recordBy);
  if (first === undefined && recording.abandon()) throw tooLate();
  if (first !== undefined && first !== RECORDED) return first; // settled before any pending record (failed)
  const pending = await recording.stored; // stored, or being stored when the deadline came
  const { withdrawConfirmWaitMs } = useConfig().limits;
  return (await by(outcome, Math.min(Date.now() + withdrawConfirmWaitMs, answerBy))) ?? pending;
}

const RECORDED = Symbol("recorded");

/** The withdrawal from its preflight to its stored outcome (the receipt, a refusal), or pending at the receipt wait. */
async function deliver(wallet: WalletRecord, chain: ChainSettings, request: Request, id: string, recording: Recording): Promise<Result> {
  const client = publicClient(chain);
  const bundler = bundlerClient(chain);
  const signable = await verifySignable(wallet, chain);
  const { amount, balance, call } = await preflight(client, wallet, request);

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
      // a new id, or a crashed request's that recorded nothing: nothing can have used its key
      nonce: { value: composeNonce(nonceKey), mayBeUsed: false },
      plan: async () => ({ calls: (value) => [call(value)], amount }),
      // Stored before it is sent: whatever happens next (a lost answer, a crash), the follow-up knows the
      // operation and can send the very same one again. Past the deadline, or recorded by another request
      // holding the same id, it throws: nothing is sent.
      beforeSend: async ({ op, amount: finalAmount }, userOpHash) => {
        submitted = await recording.record(() =>
          record({
            ...base,
            status: "pending",
            userOpHash,
            amount: finalAmount.toString(),
            submittedAt: useRuntime().now(),
            nonceKey: toHex(nonceKey),
            userOp: storeOperation(op),
          }),
        );
      },
    });
  } catch (err) {
    const rejection = bundlerRejection(err);
    // the chain or the bundler unusable: 503/502; our own failures (the table) as they are
    if (rejection === undefined) throw err instanceof BaseError ? upstreamError(err) : err;
    const failed = { ...base, status: "failed" as const, message: rejection, amount: String(amount === "max" ? balance : amount) };
    return recording.record(() => record({ ...failed, submittedAt: useRuntime().now() }));
  }
  if (!dispatched.sent) return settle(submitted!, { status: "failed", message: dispatched.refusal, userOpHash: undefined });

  const { prepared, userOpHash, turn, answer } = dispatched;
  const { withdrawConfirmWaitMs, useropReceiptWaitMs } = useConfig().limits;
  // Followed past the answer (up to the user-operation receipt wait): the outcome is stored as soon as it is known,
  // and the account's deployment turn ended with it.
  const followed = await follow({
    client,
    bundler,
    entryPoint: getAddress(chain.entryPoint),
    op: prepared.op,
    hash: userOpHash,
    waitMs: Math.max(withdrawConfirmWaitMs, useropReceiptWaitMs),
    first: answer,
  }).catch((): Followed => ({ timedOut: true, taken: true }));
  const pending = submitted!;
  try {
    if ("refused" in followed) await prepared.giveBack();
    // not taken in time (deferred all along): still pending, the follow-up sends it again, so its turn is kept
    await turn.end("receipt" in followed ? "included" : "refused" in followed ? "not-sent" : "unknown");
    return await settleFollowed(pending, followed);
  } catch (err) {
    log.warn("a withdrawal's outcome could not be stored; the follow-up will", { id: pending.id, error: (err as Error).message });
    return pending;
  }
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

export async function listWithdrawals(
  walletPath: string,
  chainId: number | undefined,
  statuses: Status[],
  page: { limit: number; after?: string; before?: string },
) {
  const { wallet, chain } = await requireOwned(walletPath, chainId);
  const owner = useOwner();
  const result = await storedWithdrawals(owner, chain.chainId, wallet.address, statuses, page);
  const refreshed = await Promise.all(result.items.map((item) => refresh(fromItem(item), chain)));
  return { result: { ...result, items: refreshed }, chain, wallet };
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
