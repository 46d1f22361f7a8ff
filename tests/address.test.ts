/**
 * shared/address.ts answers exactly what viem answered before it replaced viem outside the chain code:
 * getAddress, isAddress (strict and not) with the API's all-uppercase exception, zeroAddress and
 * recoverMessageAddress, over many deterministic pseudo-random cases (seeded, so a failure reproduces).
 */
import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { getAddress, isAddress, recoverMessageAddress, zeroAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { secp256k1 } from "@noble/curves/secp256k1";
import { ZERO_ADDRESS, checksumAddress, isAcceptedAddress, isAddressShape, recoverPersonalSigner } from "../shared/address";

/** Deterministic bytes: sha256(label ‖ i), repeated to length. */
function bytes(label: string, n: number): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; out.length * 32 < n; i++) out.push(createHash("sha256").update(`${label}/${i}`).digest());
  return Buffer.concat(out).subarray(0, n);
}
const hex = (label: string, n: number) => bytes(label, n).toString("hex");

/** The rule AddressString and sign-in applied with viem: any single case, or mixed case valid under strict isAddress. */
function viemAccepted(s: string): boolean {
  if (!isAddress(s, { strict: false })) return false;
  const body = s.slice(2);
  return body === body.toLowerCase() || body === body.toUpperCase() || isAddress(s, { strict: true });
}

function viemOutcome(f: () => unknown): unknown {
  try {
    return f();
  } catch {
    return "throws";
  }
}

/** Casings of one address: lower, upper, EIP-55, EIP-55 with one letter flipped, random mixed. */
function casings(i: number): string[] {
  const lower = `0x${hex(`addr ${i}`, 20)}`;
  const eip55 = getAddress(lower);
  const letters = [...eip55.slice(2)].map((c, j) => (/[a-fA-F]/.test(c) ? j : -1)).filter((j) => j >= 0);
  const flipAt = letters.length > 0 ? letters[i % letters.length]! + 2 : -1;
  const flip = (c: string) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase());
  const flipped = flipAt < 0 ? eip55 : eip55.slice(0, flipAt) + flip(eip55[flipAt]!) + eip55.slice(flipAt + 1);
  const coins = bytes(`case ${i}`, 40);
  const mixed = "0x" + [...lower.slice(2)].map((c, j) => (coins[j]! & 1 ? c.toUpperCase() : c)).join("");
  return [lower, `0x${lower.slice(2).toUpperCase()}`, eip55, flipped, mixed];
}

const NOT_ADDRESSES = [
  "",
  "0x",
  "0x" + "a".repeat(39),
  "0x" + "a".repeat(41),
  "0X" + "a".repeat(40),
  "0x" + "g".repeat(40),
  " 0x" + "a".repeat(40),
  "0x" + "a".repeat(40) + "\n",
  "a".repeat(42),
  "0x" + "ａ".repeat(40),
];

describe("addresses without viem", () => {
  it("checksumAddress is viem's getAddress for 4,000 addresses in every casing, and throws where it throws", () => {
    for (let i = 0; i < 800; i++) {
      for (const s of casings(i)) expect(checksumAddress(s), s).toBe(getAddress(s));
    }
    for (const s of NOT_ADDRESSES) {
      expect(
        viemOutcome(() => getAddress(s)),
        JSON.stringify(s),
      ).toBe("throws");
      expect(() => checksumAddress(s), JSON.stringify(s)).toThrow();
    }
  });

  it("isAcceptedAddress is the API's rule (single case, or valid EIP-55 mixed case) as viem decided it", () => {
    let refused = 0;
    for (let i = 0; i < 800; i++) {
      for (const s of casings(i)) {
        expect(isAcceptedAddress(s), s).toBe(viemAccepted(s));
        if (!viemAccepted(s)) refused++;
      }
    }
    expect(refused).toBeGreaterThan(700); // the flipped and random mixed casings are really exercised
    for (const s of NOT_ADDRESSES) expect(isAcceptedAddress(s), JSON.stringify(s)).toBe(false);
  });

  it("isAddressShape is viem's non-strict isAddress", () => {
    for (let i = 0; i < 200; i++) {
      for (const s of casings(i)) expect(isAddressShape(s)).toBe(isAddress(s, { strict: false }));
    }
    for (const s of NOT_ADDRESSES) expect(isAddressShape(s), JSON.stringify(s)).toBe(isAddress(s, { strict: false }));
  });

  it("ZERO_ADDRESS is viem's zeroAddress", () => {
    expect(ZERO_ADDRESS).toBe(zeroAddress);
  });
});

describe("recoverPersonalSigner", () => {
  const N = secp256k1.CURVE.n;
  const messages = (i: number) => [
    `Please sign the below text for ownership verification.\n\nURI: https://app.example.com\nChain ID: ${i + 1}`,
    "",
    `ünïcødé ✓ ${i} 🚀\r\nline`,
    String.fromCharCode(0xd800 + (i % 1024)) + " lone surrogate", // encoded as U+FFFD by both
    bytes(`msg ${i}`, 64).toString("latin1"),
  ];

  it("recovers what viem's recoverMessageAddress recovers for v = 0, 1, 27, 28 and high-s forms, over 100 keys", async () => {
    for (let i = 0; i < 100; i++) {
      const account = privateKeyToAccount(`0x${hex(`key ${i}`, 32)}`);
      for (const message of messages(i).slice(0, 2 + (i % 4))) {
        const sig = await account.signMessage({ message });
        const v = parseInt(sig.slice(130), 16);
        const s = BigInt(`0x${sig.slice(66, 130)}`);
        const variants = [
          sig,
          sig.slice(0, 130) + (v - 27).toString(16).padStart(2, "0"),
          sig.slice(0, 66) + (N - s).toString(16).padStart(64, "0") + (v === 27 ? "1c" : "1b"), // malleated
        ];
        for (const signature of variants) {
          const expected = await recoverMessageAddress({ message, signature: signature as Hex });
          expect(recoverPersonalSigner(message, signature), signature).toBe(expected);
        }
        expect(recoverPersonalSigner(message, sig)).toBe(account.address);
      }
    }
  });

  it("throws wherever viem throws: r or s zero or ≥ n, r not on the curve, bad v, wrong length", async () => {
    const account = privateKeyToAccount(`0x${hex("key invalid", 32)}`);
    const message = "hello";
    const sig = await account.signMessage({ message });
    const r = sig.slice(2, 66);
    const s = sig.slice(66, 130);
    const n = N.toString(16).padStart(64, "0");
    const invalid = [
      `0x${"0".repeat(64)}${s}1b`,
      `0x${r}${"0".repeat(64)}1b`,
      `0x${n}${s}1b`,
      `0x${r}${n}1c`,
      `0x${r}${"f".repeat(64)}1b`,
      `0x${"f".repeat(64)}${s}1b`,
      `0x${"0".repeat(63)}5${s}1b`, // x = 5 is not on secp256k1 (5^3 + 7 is not a square mod p)
      `0x${r}${s}02`,
      `0x${r}${s}1d`,
      `0x${r}${s}ff`,
      sig.slice(0, 130),
      `${sig}00`,
    ];
    for (const signature of invalid) {
      expect(
        await viemOutcome(() => recoverMessageAddress({ message, signature: signature as Hex }).catch(() => "throws")),
        signature,
      ).toBe("throws");
      expect(() => recoverPersonalSigner(message, signature), signature).toThrow();
    }
  });
});
