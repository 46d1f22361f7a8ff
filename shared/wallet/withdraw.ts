/**
 * Withdrawals (API.md §11.5, §11.6): ETH or an ERC-20 out of a smart wallet as one user operation,
 * signed by the service's controller, sponsored by the chain's paymaster when configured and within the
 * sponsored-gas budgets (API.md §18.5; else paid by the wallet), sent to the chain's bundler, recorded, and
 * followed until a receipt (or the 30-minute give-up).
 */
import { ulid } from "ulid";
import { erc20Abi, getAddress, type Address, type PublicClient } from "viem";
import { ApiError, notFound } from "../errors";
import { useOwner } from "../context";
import { useConfig, useRuntime } from "../runtime";
import { listWithdrawals as storedWithdrawals, withdrawalPosition as position } from "../store/entities/withdrawal";
import type { Status } from "./schemas";
import { bundlerClient, contractRefused, publicClient, unsupportedChain } from "../chain/chains";
import { erc20Transfer } from "../chain/account";
import { getUserOperationHashV07, type AccountCall } from "../chain/userop";
import { forgetNonce, isStaleNonce, markNonceUsed, withWalletLock } from "../chain/nonce";
import { upstreamError } from "../chain/upstream";
import * as Idempotency from "../store/idempotency";
import { requireOwned, type WalletRecord } from "./wallet";
import { verifySignable } from "./signing";
import { bundlerRejection, insufficientBalance, prepareOperation, walletLockKey, type PreparedOperation } from "./operation";
import type { ChainSettings } from "../config";
import { ETH, fieldError, parseRequest, type Request, type Result, type StoredWithdrawal } from "./withdraw-request";
import { awaitReceipt, getStored, record, settle } from "./withdraw-records";
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
    const result = await withWalletLock(walletLockKey(chain.chainId, wallet.address), (hold) => send(wallet, chain, request, hold));
    if (idempotencyKey) await Idempotency.complete(owner, scope, idempotencyKey, { withdrawalId: result.id });
    return { result, replayed: false };
  } catch (err) {
    // Nothing was sent: the key is not remembered (a preflight 400, an unreachable RPC).
    if (idempotencyKey) await Idempotency.release(owner, scope, idempotencyKey);
    throw err;
  }
}

/** Preflight, build, sign, record and send one withdrawal; runs under the wallet's lock. */
async function send(
  wallet: WalletRecord,
  chain: ChainSettings,
  request: Request,
  hold: (until: Promise<unknown>) => void,
): Promise<Result> {
  const client = publicClient(chain);
  const bundler = bundlerClient(chain);
  const nonceKey = walletLockKey(chain.chainId, wallet.address);
  let signable = await verifySignable(wallet, chain);
  const { amount, balance, call } = await preflight(client, wallet, request);

  const base = {
    id: ulid(),
    chainId: chain.chainId,
    smartWalletAddress: getAddress(wallet.address),
    recipientAddress: request.recipient,
    token: request.token,
    owner: wallet.owner,
  };
  for (let attempt = 0; ; attempt++) {
    let prepared: PreparedOperation;
    try {
      // Another instance took the nonce, and may have deployed the account meanwhile.
      if (attempt > 0) signable = await verifySignable(wallet, chain);
      prepared = await prepareOperation(client, bundler, signable, chain, { calls: (value) => [call(value)], amount }, nonceKey);
    } catch (err) {
      const rejection = bundlerRejection(err);
      if (rejection === undefined) throw err instanceof ApiError ? err : upstreamError(err);
      if (isStaleNonce(rejection) && attempt === 0) {
        forgetNonce(nonceKey);
        continue;
      }
      return record({
        ...base,
        status: "failed",
        message: rejection,
        amount: String(amount === "max" ? balance : amount),
        submittedAt: useRuntime().now(),
      });
    }
    const { op, amount: finalAmount } = prepared;
    const userOpHash = getUserOperationHashV07(op, { chainId: chain.chainId, entryPoint: getAddress(chain.entryPoint) });
    let submitted: Result;
    try {
      submitted = await record({ ...base, status: "pending", userOpHash, amount: finalAmount.toString(), submittedAt: useRuntime().now() });
    } catch (err) {
      await prepared.giveBack(); // nothing sent
      throw err;
    }
    try {
      await bundler.sendUserOperation({ ...op, entryPointAddress: getAddress(chain.entryPoint) } as never);
    } catch (err) {
      const rejection = bundlerRejection(err);
      if (rejection === undefined) {
        markNonceUsed(nonceKey, op.nonce); // the answer was lost, the operation may be in: followed up as pending
        return submitted;
      }
      // Refused: never sent, so its sponsored gas goes back (a retry reserves again).
      await prepared.giveBack();
      forgetNonce(nonceKey);
      // Another instance took the nonce: build again; the retry overwrites this same record.
      if (isStaleNonce(rejection) && attempt === 0) continue;
      return settle(submitted, { status: "failed", message: rejection, userOpHash: undefined });
    }
    markNonceUsed(nonceKey, op.nonce);
    const { withdrawConfirmWaitMs, useropReceiptWaitMs } = useConfig().limits;
    // The wallet's next operation waits for this one's inclusion (up to the user-operation receipt wait), so
    // it is built against the state this one leaves: a deployed account, the next nonce. The caller gets its
    // answer after at most withdraw_confirm_wait_ms either way.
    const receipt = bundler
      .waitForUserOperationReceipt({
        hash: userOpHash,
        timeout: Math.max(withdrawConfirmWaitMs, useropReceiptWaitMs),
        pollingInterval: 200,
      })
      .catch(() => undefined); // no receipt in time, or the bundler could not be asked: still pending
    hold(receipt);
    return awaitReceipt(submitted, receipt, withdrawConfirmWaitMs);
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
