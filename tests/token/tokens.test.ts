/**
 * GET /tokens/{address} (API.md §17.4) over a real server whose devnet RPC sits behind a proxy that counts every
 * call (tests/support/rpc-proxy.ts): ERC-20 metadata read from test tokens (string and `bytes32` answers, no
 * `name()`, decimals out of range, no contract), the native sentinel without any chain call, the table cache
 * (the second answer `source: cache` with no RPC call; 24 hours found, 10 minutes not found; shared by every
 * caller), a chain that cannot be read answered 503 and never cached as `found: false`, the 400s, and the
 * reference client's `client.tokens.retrieve`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@avaprotocol/sdk-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { getAddress, type Address } from "viem";
import { startService, type TestService } from "../support/service";
import { stackEnv } from "../support/runtime";
import { compileContract, devnet, fundedAccount } from "../support/chain";
import { startRpcProxy, type RpcProxy } from "../support/rpc-proxy";
import { httpTarget } from "../support/server";
import { signIn, type SignedIn } from "../support/auth";
import { jsonClient } from "../support/client";

const CHAIN = 31337;
const NATIVE = "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE";
const HOUR = 3600_000;

const TOKENS = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract StringToken {
    function name() external pure returns (string memory) { return "Test Token"; }
    function symbol() external pure returns (string memory) { return "TST"; }
    function decimals() external pure returns (uint8) { return 6; }
}
contract Bytes32Token {
    function name() external pure returns (bytes32) { return "Maker"; }
    function symbol() external pure returns (bytes32) { return "MKR"; }
    function decimals() external pure returns (uint256) { return 18; }
}
contract NoNameToken {
    function symbol() external pure returns (string memory) { return "NN"; }
    function decimals() external pure returns (uint8) { return 0; }
}
contract WideDecimals {
    function symbol() external pure returns (string memory) { return "WIDE"; }
    function decimals() external pure returns (uint256) { return 256; }
}
`;

let service: TestService;
let proxy: RpcProxy;
let alice: SignedIn;
let clock: number | undefined;
const deployed: Record<string, Address> = {};
const { call } = jsonClient(() => service.url);

async function deploy(name: string): Promise<Address> {
  const { wallet } = await fundedAccount();
  const hash = await wallet.deployContract({ abi: [], bytecode: compileContract(name, TOKENS) });
  return getAddress((await devnet().client.waitForTransactionReceipt({ hash })).contractAddress!);
}

beforeAll(async () => {
  proxy = await startRpcProxy(devnet().rpcUrl);
  const chains = (JSON.parse(stackEnv().CHAINS!) as { chainId: number; rpcUrl: string }[]).map((c) =>
    c.chainId === CHAIN ? { ...c, rpcUrl: proxy.url } : c,
  );
  service = await startService({ CHAINS: JSON.stringify(chains) });
  service.runtime.now = () => clock ?? Date.now();
  // Three days: the test moves the clock past the 24-hour cache.
  alice = await signIn(httpTarget(service.url), { chainId: CHAIN, expiresInMs: 72 * HOUR });
  for (const name of ["StringToken", "Bytes32Token", "NoNameToken", "WideDecimals"]) deployed[name] = await deploy(name);
});

afterAll(async () => {
  await service?.close();
  await proxy?.close();
});

const get = (path: string, who: SignedIn = alice) => call(who, "GET", path);
/** What one request costs at the RPC: the methods it called. */
async function rpcCalls<T>(run: () => Promise<T>): Promise<{ result: T; methods: string[] }> {
  const before = proxy.methods.length;
  const result = await run();
  return { result, methods: proxy.methods.slice(before) };
}
const lower = (address: string) => address.toLowerCase();
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** The bytes32 test token's metadata (a MakerDAO-style contract). */
const maker = () => ({ found: true, address: deployed.Bytes32Token, chainId: CHAIN, name: "Maker", symbol: "MKR", decimals: 18 });

describe("GET /tokens/{address}: metadata read from the chain", () => {
  it("reads decimals, symbol and name with three eth_calls, then answers from the table cache without any RPC call", async () => {
    const address = deployed.StringToken!;
    const first = await rpcCalls(() => get(`/tokens/${lower(address)}`));
    expect(first.result.status).toBe(200);
    expect(first.result.body).toEqual({
      found: true,
      address,
      chainId: CHAIN,
      name: "Test Token",
      symbol: "TST",
      decimals: 6,
      source: "rpc",
    });
    expect(first.methods).toEqual(["eth_call", "eth_call", "eth_call"]);

    const second = await rpcCalls(() => get(`/tokens/${address}?chainId=${CHAIN}`));
    expect(second.result.status).toBe(200);
    expect(second.result.body).toEqual({ ...first.result.body, source: "cache" });
    expect(second.methods).toEqual([]);
  });

  it("decodes bytes32 symbols and names, and tolerates a token without name()", async () => {
    expect((await get(`/tokens/${deployed.Bytes32Token}`)).body).toEqual({ ...maker(), source: "rpc" });
    const noName = await get(`/tokens/${deployed.NoNameToken}`);
    expect(noName.body).toEqual({ found: true, address: deployed.NoNameToken, chainId: CHAIN, symbol: "NN", decimals: 0, source: "rpc" });
    expect((await get(`/tokens/${deployed.NoNameToken}`)).body).toEqual({ ...noName.body, source: "cache" });
  });

  it("answers found: false, with no other metadata, for decimals above 255 and for an address without code; cached too", async () => {
    const wide = await get(`/tokens/${deployed.WideDecimals}`);
    expect(wide.body).toEqual({ found: false, address: deployed.WideDecimals, chainId: CHAIN, source: "rpc" });
    const nobody = randomAddress();
    expect((await get(`/tokens/${nobody}`)).body).toEqual({ found: false, address: nobody, chainId: CHAIN, source: "rpc" });
    const again = await rpcCalls(() => get(`/tokens/${nobody}`));
    expect(again.result.body).toEqual({ found: false, address: nobody, chainId: CHAIN, source: "cache" });
    expect(again.methods).toEqual([]);
  });

  it("answers the native sentinel from the chain's configuration, without a chain call or a cache", async () => {
    const native = await rpcCalls(() => get(`/tokens/${lower(NATIVE)}`));
    expect(native.result.status).toBe(200);
    expect(native.result.body).toEqual({ found: true, address: NATIVE, chainId: CHAIN, symbol: "ETH", decimals: 18, source: "native" });
    expect(native.methods).toEqual([]);
  });

  it("keeps a found token 24 hours and a found: false 10 minutes", async () => {
    const token = await deploy("StringToken");
    const nobody = randomAddress();
    const start = Date.now();
    clock = start;
    try {
      expect((await get(`/tokens/${token}`)).body.source).toBe("rpc");
      expect((await get(`/tokens/${nobody}`)).body.source).toBe("rpc");
      clock = start + 10 * 60_000 - 1_000;
      expect((await get(`/tokens/${nobody}`)).body.source).toBe("cache");
      clock = start + 10 * 60_000 + 1_000;
      expect((await get(`/tokens/${nobody}`)).body).toMatchObject({ found: false, source: "rpc" });
      expect((await get(`/tokens/${token}`)).body.source).toBe("cache");
      clock = start + 24 * HOUR - 1_000;
      expect((await get(`/tokens/${token}`)).body.source).toBe("cache");
      clock = start + 24 * HOUR + 1_000;
      expect((await get(`/tokens/${token}`)).body).toMatchObject({ found: true, symbol: "TST", source: "rpc" });
    } finally {
      clock = undefined;
    }
  });

  it("one cache for every caller: another owner's first read is answered from it", async () => {
    const bob = await signIn(httpTarget(service.url), { chainId: CHAIN });
    const read = await rpcCalls(() => get(`/tokens/${deployed.StringToken}`, bob));
    expect(read.result.body).toMatchObject({ found: true, symbol: "TST", source: "cache" });
    expect(read.methods).toEqual([]);
  });
});

describe("GET /tokens/{address}: a chain that cannot be read", () => {
  it("answers 503 UPSTREAM_UNAVAILABLE when nothing is cached, never caches it as found: false, and still answers what is cached", async () => {
    const token = await deploy("StringToken");
    proxy.rules.down = true;
    try {
      const down = await get(`/tokens/${token}`);
      expect(down.status).toBe(503);
      expect(down.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(down.body).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
      // Cached earlier: answered while the chain is down.
      expect((await get(`/tokens/${deployed.StringToken}`)).body).toMatchObject({ found: true, source: "cache" });
    } finally {
      proxy.rules.down = false;
    }
    expect((await get(`/tokens/${token}`)).body).toMatchObject({ found: true, symbol: "TST", decimals: 6, source: "rpc" });
  });

  it("answers 502 when the RPC answers with an error that is not a revert, and caches nothing", async () => {
    const token = await deploy("NoNameToken");
    proxy.rules.failMethods = new Set(["eth_call"]);
    try {
      const bad = await get(`/tokens/${token}`);
      expect(bad.status).toBe(502);
      expect(bad.body.code).toBe("UPSTREAM_UNAVAILABLE");
    } finally {
      proxy.rules.failMethods = undefined;
    }
    expect((await get(`/tokens/${token}`)).body).toMatchObject({ found: true, symbol: "NN", source: "rpc" });
  });
});

describe("GET /tokens/{address}: requests refused", () => {
  it("a malformed address is 400 VALIDATION_FAILED at path.address (not 404), a bad checksum too", async () => {
    for (const bad of ["0x1234", "nope", `0x${"g".repeat(40)}`, "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEee"]) {
      const res = await get(`/tokens/${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.code).toBe("VALIDATION_FAILED");
      expect(res.body.errors).toEqual([expect.objectContaining({ path: "path.address" })]);
    }
  });

  it("an unconfigured chain is 400 UNSUPPORTED_CHAIN, a malformed chainId 400 VALIDATION_FAILED at query.chainId", async () => {
    const unsupported = await get(`/tokens/${deployed.StringToken}?chainId=999999`);
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.code).toBe("UNSUPPORTED_CHAIN");
    const malformed = await get(`/tokens/${deployed.StringToken}?chainId=abc`);
    expect(malformed.status).toBe(400);
    expect(malformed.body.errors).toEqual([expect.objectContaining({ path: "query.chainId" })]);
  });

  it("needs a token", async () => {
    const res = await fetch(`${service.url}/tokens/${NATIVE}`);
    expect(res.status).toBe(401);
  });
});

describe("the reference client @avaprotocol/sdk-js 4.9.0: client.tokens.retrieve", () => {
  it("reads a token's metadata and the native sentinel", async () => {
    const client = new Client({ baseUrl: service.url });
    await client.auth.exchangeWithKey(generatePrivateKey(), { uri: "https://app.example.com", chainId: CHAIN, version: "0.1.0" });
    const token = (await client.tokens.retrieve(deployed.Bytes32Token!, { chainId: CHAIN })) as unknown as Record<string, unknown>;
    expect(token).toEqual({ ...maker(), source: "cache" });
    const native = (await client.tokens.retrieve(NATIVE)) as unknown as Record<string, unknown>;
    expect(native).toMatchObject({ found: true, symbol: "ETH", decimals: 18, source: "native" });
  });
});
