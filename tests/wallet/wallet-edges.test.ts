/**
 * Wallet routes at their edges: an unreachable chain RPC (503 UPSTREAM_UNAVAILABLE, nothing recorded), a chain
 * without a bundler (withdraw 400 UNSUPPORTED_CHAIN), and an Idempotency-Key reused while the first request runs.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { devnet, setBalance } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";

const app = createServiceApp();
let alice: SignedIn;
const DEAD_CHAIN = 424242; // configured, but its RPC refuses connections
const NO_BUNDLER_CHAIN = 434343; // configured with the devnet's RPC and no bundler

beforeAll(async () => {
  const chains = JSON.parse(stackEnv().CHAINS!) as { chainId: number; rpcUrl: string; factory: string }[];
  const dev = chains.find((c) => c.chainId === 31337)!;
  await useTestRuntime({
    MAX_WALLETS_PER_OWNER: "50",
    CHAINS: JSON.stringify([
      ...chains,
      { chainId: DEAD_CHAIN, rpcUrl: "http://127.0.0.1:9/", bundlerUrl: "http://127.0.0.1:9/", factory: dev.factory },
      { chainId: NO_BUNDLER_CHAIN, rpcUrl: dev.rpcUrl, factory: dev.factory },
    ]),
  });
  alice = await signIn(app);
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await app.request(path, {
    method,
    headers: { ...alice.headers, ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: JSON.parse((await res.text()) || "null") };
}

const to = () => privateKeyToAccount(generatePrivateKey()).address;

describe("wallet routes at the edges", () => {
  it("registers offline on a chain whose RPC is down, then answers 503 UPSTREAM_UNAVAILABLE where the chain is needed", async () => {
    const created = await call("POST", "/wallets", { salt: "1", chainId: DEAD_CHAIN });
    expect(created.status).toBe(201); // the built-in factory derives offline
    const address = created.body.address;
    const nonce = await call("GET", `/wallets/${address}:getNonce?chainId=${DEAD_CHAIN}`);
    expect(nonce.status).toBe(503);
    expect(nonce.body).toMatchObject({ code: "UPSTREAM_UNAVAILABLE", detail: "The chain RPC or bundler is unavailable." });
    const withdraw = await call("POST", `/wallets/${address}:withdraw`, {
      recipientAddress: to(),
      amount: "1",
      token: "ETH",
      chainId: DEAD_CHAIN,
    });
    expect(withdraw.status).toBe(503);
    const listed = await call("GET", `/wallets/${address}/withdrawals?chainId=${DEAD_CHAIN}`);
    expect(listed.body.data).toEqual([]); // nothing recorded
    const otherFactory = await call("POST", "/wallets", {
      salt: "2",
      chainId: DEAD_CHAIN,
      factoryAddress: "0x000000000000000000000000000000000000dEaD",
    });
    expect(otherFactory.status).toBe(503); // a non-default factory needs the RPC
  });

  it("refuses withdrawals on a chain without a bundler with UNSUPPORTED_CHAIN", async () => {
    const { body } = await call("POST", "/wallets", { salt: "3", chainId: NO_BUNDLER_CHAIN });
    const res = await call("POST", `/wallets/${body.address}:withdraw`, {
      recipientAddress: to(),
      amount: "1",
      token: "ETH",
      chainId: NO_BUNDLER_CHAIN,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("UNSUPPORTED_CHAIN");
    expect((await call("GET", `/wallets?chainId=${NO_BUNDLER_CHAIN}`)).body.data).toHaveLength(1);
  });

  it("answers 409 IDEMPOTENCY_IN_PROGRESS to a repeat that arrives while the first is still sending", async () => {
    const { body } = await call("POST", "/wallets", { salt: "4" });
    await setBalance(body.address, parseEther("1"));
    const request = { recipientAddress: to(), amount: "77", token: "ETH" };
    const [a, b] = await Promise.all([
      call("POST", `/wallets/${body.address}:withdraw`, request, { "Idempotency-Key": "same" }),
      call("POST", `/wallets/${body.address}:withdraw`, request, { "Idempotency-Key": "same" }),
    ]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    expect([a, b].find((r) => r.status === 409)!.body.code).toBe("IDEMPOTENCY_IN_PROGRESS");
    expect(await devnet().client.getBalance({ address: request.recipientAddress })).toBe(77n);
  });
});
