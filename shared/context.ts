/**
 * Per-request context: who is calling and which request this is. Auth middleware sets it;
 * domain code reads it with useOwner() instead of threading the owner through every signature.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { ApiError } from "./errors";

export interface Caller {
  /** EIP-55 address of the signed-in EOA (the JWT `sub`). */
  owner: `0x${string}`;
  /** The chain named by the JWT `aud`. */
  audienceChainId: number;
}

const storage = new AsyncLocalStorage<Caller>();

export function withCaller<T>(caller: Caller, fn: () => T): T {
  return storage.run(caller, fn);
}

export function useCaller(): Caller {
  const caller = storage.getStore();
  if (!caller) throw new ApiError(401, "AUTH_REQUIRED", "Authentication is required.");
  return caller;
}

/** The caller, or undefined on a request served with none (a partner's token read, API.md §21.1). */
export const currentCaller = (): Caller | undefined => storage.getStore();

export const useOwner = () => useCaller().owner;
