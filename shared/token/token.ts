/**
 * Token metadata (API.md §17.4): ERC-20 `decimals()`, `symbol()` and `name()` read from the chain with plain
 * `eth_call`s and decoded by hand, so that `bytes32` answers (early tokens such as MKR) read as text and a missing
 * `name()` is tolerated; the native sentinel from the chain's configuration. What the chain answered, found or
 * not, is cached in the table (pattern 25: 24 hours found, 10 minutes not found); a chain that could not be read
 * is never cached, so it can never be remembered as `found: false`.
 */
import {
  BaseError,
  ExecutionRevertedError,
  RawContractError,
  decodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  hexToBigInt,
  hexToBytes,
  size,
  slice,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { defineEntity } from "../store/entity";
import { Keys } from "../store/item-keys";
import { publicClient, resolveCallerChain } from "../chain/chains";
import { upstreamError } from "../chain/upstream";
import { NATIVE_TOKEN, type Metadata } from "./endpoints";
import { useRuntime } from "../current-runtime";

const FOUND_TTL_MS = 24 * 3600_000;
const NOT_FOUND_TTL_MS = 10 * 60_000;
/** A `name()` or `symbol()` longer than this (UTF-8 bytes) is no answer: metadata, not a payload (docs/decisions.md "Token metadata"). */
const MAX_TEXT_BYTES = 256;

/** What the chain said about a token, as cached (pattern 25). */
interface Read {
  found: boolean;
  name?: string;
  symbol?: string;
  decimals?: number;
}

/** The cached read: when it was read (ms) and when the item expires (TTL, s). */
interface CachedRead extends Read {
  cachedAt: number;
  expiresAt: number;
}

const TokenCache = defineEntity<CachedRead, { chainId: number; address: string }>({
  type: "tokenMetadata",
  version: 1,
  key: ({ chainId, address }) => Keys.tokenMetadata(chainId, address),
});

const isNative = (address: string) => address.toLowerCase() === NATIVE_TOKEN.toLowerCase();

/** The metadata of `address` (EIP-55) on the caller's chain (`chainId`, else the JWT `aud` chain, else the default). */
export async function metadata(address: Address, chainId?: number): Promise<Metadata> {
  const chain = resolveCallerChain(chainId);
  const at = { address, chainId: chain.chainId };
  if (isNative(address)) {
    return { found: true, ...at, symbol: chain.nativeToken.symbol, decimals: chain.nativeToken.decimals, source: "native" };
  }
  const id = { chainId: chain.chainId, address };
  const now = useRuntime().now();
  const cached = await TokenCache.get(id);
  if (cached && typeof cached.cachedAt === "number" && now < cached.cachedAt + (cached.found ? FOUND_TTL_MS : NOT_FOUND_TTL_MS)) {
    return answer(at, cached, "cache");
  }
  let read: Read;
  try {
    read = await readToken(publicClient(chain), address);
  } catch (err) {
    throw upstreamError(err);
  }
  const until = now + (read.found ? FOUND_TTL_MS : NOT_FOUND_TTL_MS);
  await TokenCache.put(id, { ...read, cachedAt: now, expiresAt: Math.ceil(until / 1000) });
  return answer(at, read, "rpc");
}

function answer(at: { address: Address; chainId: number }, read: Read, source: "rpc" | "cache"): Metadata {
  if (!read.found) return { found: false, ...at, source };
  return {
    found: true,
    ...at,
    ...(read.name !== undefined ? { name: read.name } : {}),
    symbol: read.symbol,
    decimals: read.decimals,
    source,
  };
}

const call = (functionName: "decimals" | "symbol" | "name") => encodeFunctionData({ abi: erc20Abi, functionName });

/** Reads the three calls at once; throws only when the chain could not be read (never for a contract's refusal). */
async function readToken(client: PublicClient, address: Address): Promise<Read> {
  const [decimalsData, symbolData, nameData] = await Promise.all([
    answerOf(client, address, call("decimals")),
    answerOf(client, address, call("symbol")),
    answerOf(client, address, call("name")),
  ]);
  const decimals = decodeDecimals(decimalsData);
  const symbol = decodeText(symbolData);
  if (decimals === null || symbol === null) return { found: false };
  const name = decodeText(nameData);
  return { found: true, ...(name !== null ? { name } : {}), symbol, decimals };
}

/** The call's return data; null when the contract refused (reverted, or nothing there to answer). */
async function answerOf(client: PublicClient, to: Address, data: Hex): Promise<Hex | null> {
  try {
    const result = await client.call({ to, data });
    return result.data && result.data !== "0x" ? result.data : null;
  } catch (err) {
    if (err instanceof BaseError && err.walk((e) => e instanceof ExecutionRevertedError || e instanceof RawContractError)) return null;
    throw err;
  }
}

/** `uint8` as ABI-encoded (a full word); a value above 255 is no ERC-20 answer. */
function decodeDecimals(data: Hex | null): number | null {
  if (data === null || size(data) < 32) return null;
  const value = hexToBigInt(slice(data, 0, 32));
  return value <= 255n ? Number(value) : null;
}

/** An ABI `string`, or a `bytes32` (exactly one word, its trailing zero bytes dropped); null when neither, empty or too long. */
function decodeText(data: Hex | null): string | null {
  if (data === null) return null;
  let bytes: Uint8Array;
  if (size(data) === 32) {
    bytes = hexToBytes(data);
    let end = bytes.length;
    while (end > 0 && bytes[end - 1] === 0) end--;
    bytes = bytes.subarray(0, end);
  } else {
    try {
      bytes = hexToBytes(decodeAbiParameters([{ type: "bytes" }], data)[0]);
    } catch {
      return null;
    }
  }
  if (bytes.length === 0 || bytes.length > MAX_TEXT_BYTES) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}
