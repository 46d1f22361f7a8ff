/**
 * Delivering a signed user operation to the bundler and following it to its receipt (API.md §11.5, §19).
 *
 * An operation's nonce key belongs to that operation alone (../chain/nonce.ts), so whatever the bundler says about
 * that nonce says it about this operation: when an answer is lost the very same operation is sent again (same bytes,
 * same hash), never a new one under another key, and the EntryPoint includes it at most once. A re-sent operation
 * is in when the bundler takes it or already holds it ("already known", the same nonce "already present" or "being
 * processed"), or when the chain has already used its nonce; it was never in when the bundler refuses it for any
 * other reason while its nonce is still unused.
 */
import { BaseError, RpcRequestError, getAddress, type Address, type Hex, type PublicClient } from "viem";
import { entryPoint07Abi, type BundlerClient, type UserOperationReceipt } from "viem/account-abstraction";
import { splitNonce } from "../chain/nonce";
import type { UserOperationV07 } from "../chain/userop-signer";

/** The bundler's or paymaster's JSON-RPC error (message and code); undefined for transport failures. */
export function bundlerRefusal(err: unknown): { message: string; code: number } | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const rpc = err.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  if (!rpc) return undefined;
  return { message: rpc.details || rpc.shortMessage, code: rpc.code };
}

/** The bundler's or paymaster's refusal message when it answered with a JSON-RPC error; undefined for transport failures. */
export function bundlerRejection(err: unknown): string | undefined {
  return bundlerRefusal(err)?.message;
}

/**
 * A refusal because the account is being or has been deployed by another operation: init code for an account that
 * has code (AA10), or a second operation with init code while one is in the bundler's mempool (Alto: AA10 or AA25
 * "invalid account deployment"). The operation is then built again without init code once the account has code.
 */
export const isDeploymentConflict = (message: string) => /\bAA10\b|invalid account deployment/i.test(message);

/** The bundler holds this very operation (the same hash). */
const sameOperationHeld = (message: string) => /already known/i.test(message);
/** The bundler holds an operation under this nonce of ours: for a re-sent operation, the same one sent before. */
const alreadyHeld = (message: string) => sameOperationHeld(message) || /already present|already being processed/i.test(message);
/**
 * The bundler holds as many of the sender's operations as it takes (ERC-7562 SAME_SENDER_MEMPOOL_COUNT, 4 for an
 * unstaked sender; Rundler "Max operations (4) reached for sender …", Alto "Maximum number of parallel user
 * operations … reached"): not a refusal of the operation, a "not now". It is sent again until taken.
 */
const senderLimitReached = (message: string) => /\bmax(imum)?\b[^.]*\bop(eration)?s\b[^.]*\breached\b/i.test(message);

/**
 * What the bundler said to a send: accepted; refused (never in); lost (no answer: it may be in); or deferred (the
 * sender's operations fill the bundler's share for now: not in, send it again later).
 */
export type SendAnswer = { accepted: true } | { lost: true } | { deferred: string } | { refused: string };

/**
 * eth_sendUserOperation. "Already known" (the bundler holds this very operation: it is a repeat, ours or a proxy's, of
 * a send whose answer was lost) counts as accepted: viem itself never retries eth_sendUserOperation.
 */
export async function sendOnce(bundler: BundlerClient, op: UserOperationV07, entryPoint: Address): Promise<SendAnswer> {
  try {
    await bundler.sendUserOperation({ ...op, entryPointAddress: getAddress(entryPoint) } as never);
    return { accepted: true };
  } catch (err) {
    const refusal = bundlerRejection(err);
    if (refusal === undefined) return { lost: true };
    if (sameOperationHeld(refusal)) return { accepted: true };
    return senderLimitReached(refusal) ? { deferred: refusal } : { refused: refusal };
  }
}

/** Whether the EntryPoint has used `op`'s nonce (its key's sequence is past it): the operation under it was included. */
async function nonceUsed(client: PublicClient, entryPoint: Address, op: UserOperationV07): Promise<boolean> {
  const current = await client.readContract({
    address: getAddress(entryPoint),
    abi: entryPoint07Abi,
    functionName: "getNonce",
    args: [op.sender, splitNonce(op.nonce).key],
  });
  return current > op.nonce;
}

/**
 * Sends `op` again (its answer was lost, or the bundler deferred it): "in" when the bundler takes it, holds it
 * already or the chain used its nonce; "lost" when unanswered again (or the chain could not say); deferred again;
 * or refused (with the message) when it was never in.
 */
export async function resend(
  client: PublicClient,
  bundler: BundlerClient,
  entryPoint: Address,
  op: UserOperationV07,
): Promise<"in" | "lost" | { deferred: string } | { refused: string }> {
  const answer = await sendOnce(bundler, op, entryPoint);
  if ("accepted" in answer) return "in";
  if ("lost" in answer) return "lost";
  if ("deferred" in answer) return answer;
  if (alreadyHeld(answer.refused)) return "in";
  const used = await nonceUsed(client, entryPoint, op).catch(() => undefined);
  if (used === undefined) return "lost";
  return used ? "in" : answer;
}

/** The receipt when the bundler has one; undefined when it has none yet or could not be asked. */
async function receiptIfAny(bundler: BundlerClient, hash: Hex): Promise<UserOperationReceipt | undefined> {
  try {
    return await bundler.getUserOperationReceipt({ hash });
  } catch {
    return undefined;
  }
}

/**
 * What following a sent operation found: its receipt; refused (it was never in); or no receipt in time, `taken` when
 * the bundler took it (or may have: an answer was lost), so it may still land; `deferred` the bundler's last "not
 * now" when it never took it.
 */
export type Followed = { receipt: UserOperationReceipt } | { refused: string } | { timedOut: true; taken: boolean; deferred?: string };

/**
 * Follows an operation to its receipt for up to `waitMs`, from the answer to its first send: while that was lost or
 * deferred, the very same operation is sent again every second until the bundler takes it; a refusal then means it
 * was never in.
 */
export async function follow(p: {
  client: PublicClient;
  bundler: BundlerClient;
  entryPoint: Address;
  op: UserOperationV07;
  hash: Hex;
  waitMs: number;
  first: Exclude<SendAnswer, { refused: string }>;
}): Promise<Followed> {
  const deadline = Date.now() + p.waitMs;
  let taken = !("deferred" in p.first);
  let deferred = "deferred" in p.first ? p.first.deferred : undefined;
  let again = !("accepted" in p.first);
  let resendAt = Date.now() + RESEND_PAUSE_MS;
  for (;;) {
    if (taken) {
      const receipt = await receiptIfAny(p.bundler, p.hash);
      if (receipt) return { receipt };
    }
    if (again && Date.now() >= resendAt) {
      const outcome = await resend(p.client, p.bundler, p.entryPoint, p.op);
      if (typeof outcome === "object" && "refused" in outcome) return outcome;
      again = outcome !== "in";
      taken ||= typeof outcome === "string";
      deferred = typeof outcome === "object" ? outcome.deferred : undefined;
      resendAt = Date.now() + RESEND_PAUSE_MS;
    }
    const left = deadline - Date.now();
    if (left <= 0) return { timedOut: true, taken, ...(deferred !== undefined && !taken ? { deferred } : {}) };
    await new Promise((resolve) => setTimeout(resolve, Math.min(RECEIPT_POLL_MS, left)));
  }
}

const RECEIPT_POLL_MS = 200;
const RESEND_PAUSE_MS = 1_000;

// ---------------------------------------------------------------------------------------------
// Stored operations (a withdrawal keeps the signed operation it sends, so its follow-up can send it again)

/** The signed operation as JSON text, integers as hex. */
export const storeOperation = (op: UserOperationV07): string =>
  JSON.stringify(op, (_key, value: unknown) => (typeof value === "bigint" ? `0x${value.toString(16)}` : value));

const INTEGER_FIELDS = [
  "nonce",
  "callGasLimit",
  "verificationGasLimit",
  "preVerificationGas",
  "maxFeePerGas",
  "maxPriorityFeePerGas",
  "paymasterVerificationGasLimit",
  "paymasterPostOpGasLimit",
] as const;

/** The operation storeOperation wrote. */
export function loadOperation(text: string): UserOperationV07 {
  const raw = JSON.parse(text) as Record<string, unknown>;
  for (const field of INTEGER_FIELDS) if (typeof raw[field] === "string") raw[field] = BigInt(raw[field]);
  return raw as UserOperationV07;
}
