/**
 * Wallet API on the real devnet (anvil + EntryPoint v0.7 + our factory + VerifyingPaymaster + Alto):
 * registration, derivation, the cap, hiding, nonce, and isolation between owners.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { getAddress, zeroAddress, type Address } from "viem";
import { useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { appCall, NO_WORKFLOW_COUNTS } from "../support/client";
import { devnet } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { controlledAccountFactoryAbi } from "../../shared/chain/solidity/artifacts";
import { controlledAccount } from "../../shared/chain/account";
import { getSenderAddress } from "../../shared/chain/userop-account";

const app = createServiceApp();
let alice: SignedIn;
let bob: SignedIn;

beforeAll(async () => {
  await useTestRuntime({ MAX_WALLETS_PER_OWNER: "5" });
  [alice, bob] = await Promise.all([signIn(app), signIn(app)]);
});

const call = appCall(app);

describe("POST /wallets", () => {
  it("derives the same address as the factory's getAddress and the EntryPoint's getSenderAddress", async () => {
    const { status, body } = await call(alice, "POST", "/wallets", { salt: "0" });
    expect(status).toBe(201);
    const d = devnet();
    const fromFactory = await d.client.readContract({
      address: d.factory,
      abi: controlledAccountFactoryAbi,
      functionName: "getAddress",
      args: [alice.owner, 0n],
    });
    const fromEntryPoint = await getSenderAddress(d.client, {
      factory: d.factory,
      factoryData: controlledAccount.factoryData(alice.owner, 0n),
      entryPoint: d.entryPoint,
    });
    expect(body.address).toBe(fromFactory);
    expect(body.address).toBe(fromEntryPoint);
    expect(body).toEqual({
      address: fromFactory,
      salt: "0",
      factoryAddress: getAddress(d.factory),
      isHidden: false,
      ...NO_WORKFLOW_COUNTS,
    });
    // not deployed at registration
    expect(await d.client.getCode({ address: body.address })).toBeUndefined();
  });

  it("is an idempotent ensure-exists: the same triple answers 200 with the same wallet", async () => {
    const first = await call(alice, "POST", "/wallets", { salt: "77" });
    const again = await call(alice, "POST", "/wallets", { salt: "77", factoryAddress: devnet().factory.toLowerCase() });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
  });

  it.each([["-1"], [""], ["0x10"], ["007"], ["1.5"], [(2n ** 256n).toString()]])(
    "rejects salt %j with VALIDATION_FAILED naming body.salt",
    async (salt) => {
      const { status, body } = await call(alice, "POST", "/wallets", { salt });
      expect(status).toBe(400);
      expect(body.code).toBe("VALIDATION_FAILED");
      expect(body.errors[0].path).toBe("body.salt");
    },
  );

  it("accepts the largest salt, 2^256 - 1", async () => {
    const { status } = await call(bob, "POST", "/wallets", { salt: (2n ** 256n - 1n).toString() });
    expect(status).toBe(201);
  });

  it("rejects a numeric salt, a missing salt and unknown members", async () => {
    for (const body of [{ salt: 1 }, {}, { salt: "1", extra: true }]) {
      const res = await call(alice, "POST", "/wallets", body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("VALIDATION_FAILED");
    }
  });

  it("answers INVALID_FACTORY for the zero address and for an address without code", async () => {
    for (const factoryAddress of [zeroAddress, "0x000000000000000000000000000000000000dEaD"]) {
      const { status, body } = await call(alice, "POST", "/wallets", { salt: "1", factoryAddress });
      expect(status).toBe(400);
      expect(body.code).toBe("INVALID_FACTORY");
    }
  });

  it("derives offline for the default factory named explicitly in mixed case", async () => {
    const res = await call(bob, "POST", "/wallets", { salt: "5", factoryAddress: getAddress(devnet().factory) });
    expect(res.status).toBe(201);
    expect(res.body.factoryAddress).toBe(getAddress(devnet().factory));
  });

  it("answers UNSUPPORTED_CHAIN for a chain that is not configured", async () => {
    const { status, body } = await call(alice, "POST", "/wallets", { salt: "1", chainId: 999 });
    expect(status).toBe(400);
    expect(body.code).toBe("UNSUPPORTED_CHAIN");
  });

  it("holds the cap under 20 concurrent creates: exactly 5 wallets, the rest 429 WALLETS_LIMIT_REACHED, nothing written", async () => {
    const carol = await signIn(app);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => call(carol, "POST", "/wallets", { salt: String(1000 + i) })));
    const created = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 429);
    expect(created).toHaveLength(5);
    expect(refused).toHaveLength(15);
    for (const r of refused) {
      expect(r.body).toMatchObject({ code: "WALLETS_LIMIT_REACHED", limit: 5, status: 429 });
      expect(r.headers.get("Retry-After")).toBeNull();
    }
    const list = await call(carol, "GET", "/wallets?includeHidden=true");
    expect(list.body.data).toHaveLength(5);
    // an existing wallet is still answered at the cap
    const existing = await call(carol, "POST", "/wallets", { salt: created[0]!.body.salt });
    expect(existing.status).toBe(200);
  });
});

describe("GET /wallets and PATCH /wallets/{address}", () => {
  it("lists by salt as a number, hides hidden wallets unless includeHidden=true", async () => {
    const dave = await signIn(app);
    for (const salt of ["10", "2", "1"]) expect((await call(dave, "POST", "/wallets", { salt })).status).toBe(201);
    const listed = await call(dave, "GET", "/wallets");
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body)).toEqual(["data"]);
    expect(listed.body.data.map((w: { salt: string }) => w.salt)).toEqual(["1", "2", "10"]);

    const target = listed.body.data[1].address as string;
    const hidden = await call(dave, "PATCH", `/wallets/${target.toLowerCase()}`, { isHidden: true });
    expect(hidden.status).toBe(200);
    expect(hidden.body).toMatchObject({ address: target, isHidden: true });

    expect((await call(dave, "GET", "/wallets")).body.data.map((w: { salt: string }) => w.salt)).toEqual(["1", "10"]);
    expect((await call(dave, "GET", "/wallets?includeHidden=true")).body.data).toHaveLength(3);
    // re-registering a hidden wallet keeps it hidden
    expect((await call(dave, "POST", "/wallets", { salt: "2" })).body.isHidden).toBe(true);
    // {} changes nothing
    expect((await call(dave, "PATCH", `/wallets/${target}`, {})).body.isHidden).toBe(true);
  });

  it("rejects bad query values and unknown update members", async () => {
    expect((await call(alice, "GET", "/wallets?includeHidden=yes")).body.code).toBe("VALIDATION_FAILED");
    expect((await call(alice, "GET", "/wallets?chainId=12345")).body.code).toBe("UNSUPPORTED_CHAIN");
    const { body } = await call(alice, "POST", "/wallets", { salt: "3" });
    const res = await call(alice, "PATCH", `/wallets/${body.address}`, { salt: "4" });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].path).toBe("body.salt");
  });

  it("answers 404 WALLET_NOT_FOUND for unknown and malformed addresses", async () => {
    for (const address of ["0x000000000000000000000000000000000000bEEF", "not-an-address"]) {
      const res = await call(alice, "PATCH", `/wallets/${address}`, { isHidden: true });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe("WALLET_NOT_FOUND");
    }
  });
});

describe("GET /wallets/{address}:getNonce", () => {
  it('answers "0" for an account that is not deployed yet', async () => {
    const { body } = await call(alice, "POST", "/wallets", { salt: "8" });
    const res = await call(alice, "GET", `/wallets/${body.address}:getNonce`);
    expect(res).toMatchObject({ status: 200, body: { nonce: "0" } });
    const encoded = await call(alice, "GET", `/wallets/${body.address}%3AgetNonce`);
    expect(encoded.body).toEqual({ nonce: "0" });
  });
});

describe("isolation between owners", () => {
  it("answers 404 on every wallet route for another owner's wallet, exactly as for an unknown one", async () => {
    const { body } = await call(alice, "POST", "/wallets", { salt: "9" });
    const foreign = body.address as Address;
    const unknown = "0x000000000000000000000000000000000000bEEF";
    const routes: [string, string, unknown?][] = [
      ["PATCH", `/wallets/${foreign}`, { isHidden: true }],
      ["GET", `/wallets/${foreign}:getNonce`],
      [
        "POST",
        `/wallets/${foreign}:withdraw`,
        { recipientAddress: "0x000000000000000000000000000000000000CAFE", amount: "1", token: "ETH" },
      ],
      ["GET", `/wallets/${foreign}/withdrawals`],
      ["GET", `/wallets/${foreign}/withdrawals/01JD7Q0S7W3C2Y8K5N6M4P1R9T`],
    ];
    for (const [method, path, reqBody] of routes) {
      const theirs = await call(bob, method, path, reqBody);
      const nobodys = await call(bob, method, path.replace(foreign, unknown), reqBody);
      expect(theirs.status).toBe(404);
      expect(theirs.body.code).toBe("WALLET_NOT_FOUND");
      expect({ ...theirs.body, instance: "" }).toEqual({ ...nobodys.body, instance: "" });
    }
    expect((await call(bob, "GET", "/wallets?includeHidden=true")).body.data.map((w: { address: string }) => w.address)).not.toContain(
      foreign,
    );
    // untouched
    expect((await call(alice, "GET", "/wallets")).body.data.find((w: { address: string }) => w.address === foreign).isHidden).toBe(false);
  });

  it("registers the same salt for two owners as two different accounts", async () => {
    const a = await call(alice, "POST", "/wallets", { salt: "4242" });
    const b = await call(bob, "POST", "/wallets", { salt: "4242" });
    expect(a.body.address).not.toBe(b.body.address);
  });
});
