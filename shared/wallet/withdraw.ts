/**
 * Withdrawals (API.md §11.5, §11.6): ETH or an ERC-20 out of a smart wallet as one user operation,
 * signed by the service's controller, sponsored by the chain's paymaster when configured and within the
 * sponsored-gas budgets (API.md §18.5; else paid by the wallet), sent to the chain's bundler, recorded, and
 * followed until a receipt (or the 30-minute give-up).
 */
import * as v from "valibot";
import { ulid } from "ulid";
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import {
  erc20Abi,
  getAddress,
  isAddressEqual,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { UserOperationReceiptNotFoundError, type UserOperationReceipt } from "viem/account-abstraction";
import { ApiError, notFound, validationFailed, type FieldError } from "../errors";
import { useOwner } from "../context";
import { useConfig, useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { queryPage } from "../store/query";
import { fieldErrors } from "../http/validate";
import { Status, WithdrawBody, type WithdrawResult } from "./schemas";
import { bundlerClient, chainSettings, contractRefused, publicClient, unsupportedChain } from "../chain/chains";
import { erc20Transfer } from "../chain/account";
import { getUserOperationHashV07, type AccountCall } from "../chain/userop";
import { forgetNonce, isStaleNonce, markNonceUsed, withWalletLock } from "../chain/nonce";
import { upstreamError } from "../chain/upstream";
import * as Idempotency from "../store/idempotency";
import { requireOwned, type WalletRecord } from "./wallet";
import { verifySignable } from "./signing";
import { bundlerRejection, insufficientBalance, prepareOperation, walletLockKey, type PreparedOperation } from "./operation";
import type { ChainSettings } from "../config";


/** A withdrawal as answered (schemas.ts WithdrawResult documents it; the check below keeps the two in step). */
export interface Result {
  id: string;
  chainId: number;
  status: Status;
  message?: string;
  userOpHash?: Hex;
  transactionHash?: Hex;
  submittedAt: number;
  smartWalletAddress: Address;
  recipientAddress: Address;
  amount: string;
  token: Address | typeof ETH;
}

const _documented = (r: Result): v.InferOutput<typeof WithdrawResult> => r;
void _documented;

interface StoredWithdrawal extends Result {
  owner: Address;
  lastCheckedAt?: number;
}

const table = () => useConfig().tableName;
const ETH = "ETH";

// ---------------------------------------------------------------------------------------------
// Input: the specific codes of §11.5 come first, in their order, then VALIDATION_FAILED.

const Member = WithdrawBody.entries;
/** The rest of the body once the three members passed their own checks: unknown members and `chainId`. */
const Shape = v.strictObject({ ...Member, recipientAddress: v.unknown(), amount: v.unknown(), token: v.unknown() });

export interface Request {
  recipient: Address;
  amount: bigint | "max";
  token: Address | typeof ETH;
  chainId?: number;
}

export function parseRequest(walletPath: string, body: Record<string, unknown>): Request {
  const missing = ["recipientAddress", "amount", "token"].filter((k) => body[k] === undefined || body[k] === "");
  if (missing.length) {
    throw validationFailed(missing.map((k) => ({ path: `body.${k}`, message: "is required" })), "WITHDRAW_MISSING_FIELDS");
  }
  const recipient = v.safeParse(Member.recipientAddress, body.recipientAddress);
  const isWallet = recipient.success && walletPath.toLowerCase() === recipient.output.toLowerCase();
  if (!recipient.success || isAddressEqual(recipient.output, zeroAddress) || isWallet) {
    throw fieldError("WITHDRAW_BAD_RECIPIENT", "body.recipientAddress", "must be an address other than the zero address and the wallet itself");
  }
  const amount = v.safeParse(Member.amount, body.amount);
  if (!amount.success) {
    throw fieldError("WITHDRAW_BAD_AMOUNT", "body.amount", "must be a wei amount greater than 0 as a decimal string, or \"max\"");
  }
  const token = v.safeParse(Member.token, body.token);
  if (!token.success || (token.output !== ETH && isAddressEqual(token.output, zeroAddress))) {
    throw fieldError("WITHDRAW_BAD_TOKEN", "body.token", "must be \"ETH\" or a non-zero ERC-20 contract address");
  }
  const shape = v.safeParse(Shape, body, { abortEarly: false });
  if (!shape.success) throw validationFailed(fieldErrors(shape.issues, "body"));
  return {
    recipient: recipient.output,
    amount: amount.output === "max" ? "max" : BigInt(amount.output),
    token: token.output,
    chainId: shape.output.chainId,
  };
}

const fieldError = (code: string, path: string, message: string) => validationFailed([{ path, message } satisfies FieldError], code);

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
async function send(wallet: WalletRecord, chain: ChainSettings, request: Request, hold: (until: Promise<unknown>) => void): Promise<Result> {
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
      return record({ ...base, status: "failed", message: rejection, amount: String(amount === "max" ? balance : amount), submittedAt: useRuntime().now() });
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
      .waitForUserOperationReceipt({ hash: userOpHash, timeout: Math.max(withdrawConfirmWaitMs, useropReceiptWaitMs), pollingInterval: 200 })
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

// ---------------------------------------------------------------------------------------------
// Records

async function record(w: StoredWithdrawal): Promise<Result> {
  await useRuntime().db.send(
    new PutCommand({
      TableName: table(),
      Item: {
        ...Keys.withdrawal(w.owner, w.chainId, w.smartWalletAddress, w.id),
        ...(w.status === "pending" ? Keys.pendingWithdrawal(w.submittedAt, w.id) : {}),
        type: "withdrawal",
        v: 1,
        ...w,
      },
    }),
  );
  return toResult(w);
}

/** Moves a pending withdrawal to its final state (only if it is still pending). */
async function settle(
  w: Result & { owner?: Address },
  outcome: { status: Status; message?: string; transactionHash?: Hex; userOpHash?: Hex | undefined },
): Promise<Result> {
  const owner = w.owner ?? useOwner();
  const sets = ["#status = :status", "lastCheckedAt = :now"];
  const removes = ["gsi2pk", "gsi2sk"];
  const values: Record<string, unknown> = { ":status": outcome.status, ":pending": "pending", ":now": useRuntime().now() };
  if (outcome.message) {
    sets.push("message = :message");
    values[":message"] = outcome.message;
  }
  if (outcome.transactionHash) {
    sets.push("transactionHash = :tx");
    values[":tx"] = outcome.transactionHash;
  }
  if ("userOpHash" in outcome && outcome.userOpHash === undefined) removes.push("userOpHash");
  if (outcome.status === "pending") removes.length = 0;
  try {
    const out = await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.withdrawal(owner, w.chainId, w.smartWalletAddress, w.id),
        UpdateExpression: `SET ${sets.join(", ")}${removes.length ? ` REMOVE ${removes.join(", ")}` : ""}`,
        ConditionExpression: "#status = :pending",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: values,
        ReturnValues: "ALL_NEW",
      }),
    );
    return toResult(out.Attributes as StoredWithdrawal);
  } catch (err) {
    if ((err as { name?: string }).name !== "ConditionalCheckFailedException") throw err;
    const current = await getStored(owner, w.chainId, w.smartWalletAddress, w.id);
    return toResult(current ?? (w as StoredWithdrawal));
  }
}

/** The answer after at most `waitMs`: confirmed or failed once the receipt is in, else still pending. */
async function awaitReceipt(w: Result, receipt: Promise<UserOperationReceipt | undefined>, waitMs: number): Promise<Result> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, waitMs, undefined)));
  const outcome = await Promise.race([receipt, timeout]);
  clearTimeout(timer);
  if (!outcome) return w;
  return outcome.success
    ? settle(w, { status: "confirmed", transactionHash: outcome.receipt.transactionHash })
    : settle(w, { status: "failed", message: "user operation reverted", transactionHash: outcome.receipt.transactionHash });
}

async function getStored(owner: Address, chainId: number, wallet: Address, id: string): Promise<StoredWithdrawal | undefined> {
  const out = await useRuntime().db.send(
    new GetCommand({ TableName: table(), Key: Keys.withdrawal(owner, chainId, wallet, id), ConsistentRead: true }),
  );
  return out.Item as StoredWithdrawal | undefined;
}

function toResult(w: StoredWithdrawal | Result): Result {
  return {
    id: w.id,
    chainId: w.chainId,
    status: w.status,
    ...(w.message && w.status === "failed" ? { message: w.message } : {}),
    ...(w.userOpHash ? { userOpHash: w.userOpHash } : {}),
    ...(w.transactionHash ? { transactionHash: w.transactionHash } : {}),
    submittedAt: w.submittedAt,
    smartWalletAddress: getAddress(w.smartWalletAddress),
    recipientAddress: getAddress(w.recipientAddress),
    amount: w.amount,
    token: w.token,
  };
}

// ---------------------------------------------------------------------------------------------
// Following pending withdrawals

const FOLLOW_UP_INTERVAL_MS = 5_000;

/** Asks the bundler about a pending withdrawal (at most once per 5 s) and stores the outcome. */
export async function refresh(w: StoredWithdrawal, chain: ChainSettings): Promise<Result> {
  if (w.status !== "pending") return toResult(w);
  const now = useRuntime().now();
  if (w.lastCheckedAt !== undefined && now - w.lastCheckedAt < FOLLOW_UP_INTERVAL_MS) return toResult(w);
  if (w.userOpHash) {
    try {
      const receipt = await bundlerClient(chain).getUserOperationReceipt({ hash: w.userOpHash });
      return receipt.success
        ? settle(w, { status: "confirmed", transactionHash: receipt.receipt.transactionHash })
        : settle(w, { status: "failed", message: "user operation reverted", transactionHash: receipt.receipt.transactionHash });
    } catch (err) {
      if (!(err instanceof UserOperationReceiptNotFoundError)) return toResult(w); // bundler unreachable: last stored state
    }
  }
  if (now - w.submittedAt > useConfig().limits.withdrawPendingTimeoutMs) {
    return settle(w, { status: "failed", message: "user operation was not included" });
  }
  await useRuntime().db.send(
    new UpdateCommand({
      TableName: table(),
      Key: Keys.withdrawal(w.owner, w.chainId, w.smartWalletAddress, w.id),
      UpdateExpression: "SET lastCheckedAt = :now",
      ConditionExpression: "#status = :pending",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: { ":now": now, ":pending": "pending" },
    }),
  ).catch(() => undefined);
  return toResult(w);
}

/**
 * The background half of the follow-up: refreshes the oldest pending withdrawals of every owner
 * (sparse index gsi2 `WITHDRAWAL#pending`). Run every few seconds locally, every minute in AWS.
 */
export async function followUpPending(max = 100): Promise<{ checked: number; settled: number }> {
  const out = await useRuntime().db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: "gsi2",
      KeyConditionExpression: "gsi2pk = :pk",
      ExpressionAttributeValues: { ":pk": Keys.pendingWithdrawal(0, "").gsi2pk },
      Limit: max,
    }),
  );
  let settled = 0;
  for (const item of (out.Items ?? []) as StoredWithdrawal[]) {
    const chain = useConfig().chains.find((c) => c.chainId === item.chainId);
    if (!chain) continue;
    const after = await refresh(item, chainSettings(chain.chainId));
    if (after.status !== "pending") settled += 1;
  }
  return { checked: out.Items?.length ?? 0, settled };
}

export type { Status };

export async function listWithdrawals(
  walletPath: string,
  chainId: number | undefined,
  statuses: Status[],
  page: { limit: number; after?: string; before?: string },
) {
  const { wallet, chain } = await requireOwned(walletPath, chainId);
  const owner = useOwner();
  const result = await queryPage({
    pkName: "pk",
    pk: Keys.owner(owner),
    skName: "sk",
    skPrefix: Keys.withdrawalPrefix(chain.chainId, wallet.address),
    order: "desc",
    limit: page.limit,
    after: page.after,
    before: page.before,
    ...(statuses.length
      ? {
          filter: {
            expression: `#status IN (${statuses.map((_, i) => `:s${i}`).join(", ")})`,
            names: { "#status": "status" },
            values: Object.fromEntries(statuses.map((s, i) => [`:s${i}`, s])),
          },
        }
      : {}),
  });
  const refreshed = await Promise.all(result.items.map((item) => refresh(item as unknown as StoredWithdrawal, chain)));
  return { result: { ...result, items: refreshed as unknown as Record<string, unknown>[] }, chain, wallet };
}

export async function getWithdrawal(walletPath: string, chainId: number | undefined, id: string): Promise<Result> {
  const { wallet, chain } = await requireOwned(walletPath, chainId);
  const normalized = id.toUpperCase();
  const stored = /^[0-9A-HJKMNP-TV-Z]{26}$/.test(normalized) ? await getStored(useOwner(), chain.chainId, wallet.address, normalized) : undefined;
  if (!stored) throw notFound("WITHDRAWAL_NOT_FOUND", "The withdrawal");
  return refresh(stored, chain);
}

/** Sort-key position of a withdrawal, for cursors. */
export const withdrawalPosition = (chainId: number, wallet: Address, id: string) => `${Keys.withdrawalPrefix(chainId, wallet)}${id}`;
