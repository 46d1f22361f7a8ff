/**
 * JSON calls to a real server the way a client makes them, as a signed-in owner: `call` sends a JSON body when
 * one is given and answers status, headers and the parsed body; `ownerWithWallet` signs a new owner in and
 * registers one wallet (salt `salt` on the default chain).
 */
import { expect } from "vitest";
import type { Address } from "viem";
import { signIn, type SignedIn } from "./auth";
import { httpTarget } from "./server";

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Owner extends SignedIn {
  wallet: Address;
}

export function jsonClient(baseUrl: () => string) {
  async function call(who: SignedIn, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(baseUrl() + path, {
      method,
      headers: { ...who.headers, ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Json };
  }

  async function ownerWithWallet(salt = "1"): Promise<Owner> {
    const who = await signIn(httpTarget(baseUrl()), { expiresInMs: 24 * 3600_000 });
    const res = await call(who, "POST", "/wallets", { salt });
    expect(res.status).toBe(201);
    return { ...who, wallet: res.body.address as Address };
  }

  return { call, ownerWithWallet };
}
