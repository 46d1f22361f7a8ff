/**
 * Format checks of values after template expansion (API.md §8.4: a templated field that expands to the wrong
 * format fails the step INVALID_INPUT). Messages name the field, never the value (it may hold a secret).
 */
import { getAddress, isAddress, type Address, type Hex } from "viem";
import { StepFailure } from "../kind";

const MAX_UINT256 = 2n ** 256n - 1n;

export const invalid = (field: string, what: string) => new StepFailure("INVALID_INPUT", `${field} ${what}`);

export function address(value: unknown, field: string, { nonZero = false } = {}): Address {
  if (typeof value !== "string" || !isAddress(value, { strict: false })) throw invalid(field, "is not an address");
  if (nonZero && /^0x0{40}$/.test(value)) throw invalid(field, "must not be the zero address");
  return getAddress(value);
}

/** A Uint256 as a canonical decimal string (wei). */
export function wei(value: unknown, field: string, { positive = false } = {}): bigint {
  if (typeof value !== "string" || !/^(0|[1-9][0-9]*)$/.test(value)) throw invalid(field, "is not a wei amount (a decimal integer)");
  const n = BigInt(value);
  if (n > MAX_UINT256) throw invalid(field, "is above 2^256 - 1");
  if (positive && n === 0n) throw invalid(field, "must be greater than 0");
  return n;
}

export function hex(value: unknown, field: string): Hex {
  if (typeof value !== "string" || !/^0x(?:[0-9a-fA-F]{2})*$/.test(value)) throw invalid(field, "is not hex data");
  return value as Hex;
}

export function httpUrl(value: unknown, field: string): string {
  try {
    const url = new URL(String(value));
    if (url.protocol === "http:" || url.protocol === "https:") return String(value);
  } catch {
    // below
  }
  throw invalid(field, "is not an http or https URL");
}
