/** A withdrawal as answered and as stored, and its request as parsed. */
import * as v from "valibot";
import { isAddressEqual, zeroAddress, type Address, type Hex } from "viem";
import { validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { WithdrawBody, type Status, type WithdrawResult } from "./schemas";

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

export interface StoredWithdrawal extends Result {
  owner: Address;
  lastCheckedAt?: number;
  /** The operation's nonce key (hex; API.md §19), from its id. Absent on failures refused before signing. */
  nonceKey?: Hex;
  /** The signed operation as sent (delivery.ts storeOperation), so the follow-up can send it again. */
  userOp?: string;
}

export const ETH = "ETH";

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
    throw validationFailed(
      missing.map((k) => ({ path: `body.${k}`, message: "is required" })),
      "WITHDRAW_MISSING_FIELDS",
    );
  }
  const recipient = v.safeParse(Member.recipientAddress, body.recipientAddress);
  const isWallet = recipient.success && walletPath.toLowerCase() === recipient.output.toLowerCase();
  if (!recipient.success || isAddressEqual(recipient.output, zeroAddress) || isWallet) {
    throw fieldError(
      "WITHDRAW_BAD_RECIPIENT",
      "body.recipientAddress",
      "must be an address other than the zero address and the wallet itself",
    );
  }
  const amount = v.safeParse(Member.amount, body.amount);
  if (!amount.success) {
    throw fieldError("WITHDRAW_BAD_AMOUNT", "body.amount", 'must be a wei amount greater than 0 as a decimal string, or "max"');
  }
  const token = v.safeParse(Member.token, body.token);
  if (!token.success || (token.output !== ETH && isAddressEqual(token.output, zeroAddress))) {
    throw fieldError("WITHDRAW_BAD_TOKEN", "body.token", 'must be "ETH" or a non-zero ERC-20 contract address');
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

export const fieldError = (code: string, path: string, message: string) => validationFailed([{ path, message } satisfies FieldError], code);
