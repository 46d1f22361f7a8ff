/**
 * Ownership before signing (API.md §11.3, §11.5), over a real HTTP server on the devnet: a factory whose
 * `getAddress` names another owner's account can neither register it (when deployed) nor get anything signed for
 * it; a genuine factory that is not known is trusted only once the account is deployed and reports the caller as
 * `owner()`; a factory listed in `knownFactories` works like the default one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { getAddress, parseEther, zeroAddress, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { entryPoint07Abi } from "viem/account-abstraction";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type RequestTarget, type SignedIn } from "../support/auth";
import { devnet, setBalance } from "../support/chain";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient } from "../support/client";
import { createAccountThrough, deployControlledAccountFactory, deployHostileFactory } from "../support/hostile-factory";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { chainSettings } from "../../shared/chain/chains";
import { signWalletOperation, verifySignable, type SignableWallet } from "../../shared/wallet/signing";
import type { WalletRecord } from "../../shared/wallet/wallet";
import { useRuntime } from "../../shared/current-runtime";
import { encodeCreateAccount, getAccountAddress, getSenderAddress } from "../../shared/chain/userop-account";
import { type UserOperationV07 } from "../../shared/chain/userop-signer";

let server: TestServer;
let http: RequestTarget;
let knownFactory: Address; // a second ControlledAccountFactory listed in knownFactories
let otherFactory: Address; // a genuine ControlledAccountFactory that is not listed

beforeAll(async () => {
  const controller = privateKeyToAccount(stackEnv().CONTROLLER_PRIVATE_KEY as Hex).address;
  [knownFactory, otherFactory] = await Promise.all([
    deployControlledAccountFactory(controller),
    deployControlledAccountFactory(controller),
  ]);
  const chains = JSON.parse(stackEnv().CHAINS!) as { chainId: number }[];
  await useTestRuntime({
    MAX_WALLETS_PER_OWNER: "100",
    RATE_LIMIT_BURST: "1000",
    CHAINS: JSON.stringify(chains.map((c) => (c.chainId === 31337 ? { ...c, knownFactories: [knownFactory] } : c))),
  });
  server = await startTestServer(createServiceApp());
  http = { request: (path, init) => fetch(server.url + path, init) };
});

afterAll(async () => {
  await server?.close();
});

const { call } = jsonClient(() => server.url);

const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => devnet().client.getBalance({ address });
const code = (address: Address) => devnet().client.getCode({ address });
const nonceOf = (address: Address) =>
  devnet().client.readContract({ address: devnet().entryPoint, abi: entryPoint07Abi, functionName: "getNonce", args: [address, 0n] });
const withdrawals = async (who: SignedIn, wallet: Address) => (await call(who, "GET", `/wallets/${wallet}/withdrawals`)).body.data;

/** A victim's account under the default factory, holding 1 ETH; deployed or only counterfactual. */
async function victimAccount(deployed: boolean, salt = 0n) {
  const d = devnet();
  const owner = newAddress();
  const address = await getAccountAddress(d.client, { factory: d.factory, owner, salt });
  if (deployed) await createAccountThrough(d.factory, owner, salt);
  await setBalance(address, parseEther("1"));
  return { owner, salt, address };
}

/** A wallet record written straight to the table, as one registered before the ownership checks existed. */
async function insertWallet(owner: Address, address: Address, factoryAddress: Address, salt: string) {
  const { db, config, now } = useRuntime();
  const record: WalletRecord = { owner, chainId: 31337, address, salt, factoryAddress, isHidden: false, createdAt: now() };
  await db.send(
    new PutCommand({ TableName: config.tableName, Item: { ...Keys.wallet(owner, 31337, address), type: "wallet", v: 1, ...record } }),
  );
}

describe("a factory that answers another owner's account", () => {
  it("cannot register the victim's deployed account (INVALID_FACTORY) nor withdraw from it with a record from before the fix (WALLET_NOT_OWNED)", async () => {
    const victim = await victimAccount(true);
    const hostile = await deployHostileFactory({ claim: victim.address, victim });
    const attacker = await signIn(http);

    const registered = await call(attacker, "POST", "/wallets", { salt: "0", factoryAddress: hostile });
    expect(registered.status).toBe(400);
    expect(registered.body.code).toBe("INVALID_FACTORY");
    expect((await call(attacker, "GET", "/wallets?includeHidden=true")).body.data).toEqual([]);

    const to = newAddress();
    for (const factory of [hostile, devnet().factory]) {
      // the hostile factory's claim, and a forged record naming the default factory: neither is derived from the attacker
      await insertWallet(attacker.owner, victim.address, getAddress(factory), "0");
      for (const token of ["ETH", newAddress()]) {
        const res = await call(attacker, "POST", `/wallets/${victim.address}:withdraw`, { recipientAddress: to, amount: "max", token });
        expect({ factory, token, status: res.status, code: res.body.code }).toEqual({
          factory,
          token,
          status: 400,
          code: "WALLET_NOT_OWNED",
        });
      }
    }
    expect(await balance(victim.address)).toBe(parseEther("1"));
    expect(await balance(to)).toBe(0n);
    expect(await nonceOf(victim.address)).toBe(0n);
    expect(await withdrawals(attacker, victim.address)).toEqual([]);
  });

  it("may register the victim's undeployed funded address, but never gets it deployed or signed for (WALLET_NOT_OWNED)", async () => {
    const d = devnet();
    const victim = await victimAccount(false, 7n);
    const hostile = await deployHostileFactory({ claim: victim.address, victim });
    const attacker = await signIn(http);
    // the attack is real: the hostile init code passes the EntryPoint's sender check for the victim's address
    const sender = await getSenderAddress(d.client, {
      factory: hostile,
      factoryData: encodeCreateAccount(attacker.owner, 0n),
      entryPoint: d.entryPoint,
    });
    expect(sender).toBe(victim.address);

    // an undeployed account cannot be refuted at registration (API.md §11.3)
    const registered = await call(attacker, "POST", "/wallets", { salt: "0", factoryAddress: hostile });
    expect(registered.status).toBe(201);
    expect(registered.body.address).toBe(victim.address);

    const to = newAddress();
    const res = await call(attacker, "POST", `/wallets/${victim.address}:withdraw`, { recipientAddress: to, amount: "1000", token: "ETH" });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("WALLET_NOT_OWNED");
    expect(await code(victim.address)).toBeUndefined();
    expect(await balance(victim.address)).toBe(parseEther("1"));
    expect(await withdrawals(attacker, victim.address)).toEqual([]);

    // once the victim deploys it, registration is refuted and signing still refused
    await createAccountThrough(d.factory, victim.owner, victim.salt);
    expect((await call(attacker, "POST", "/wallets", { salt: "1", factoryAddress: hostile })).body.code).toBe("INVALID_FACTORY");
    const after = await call(attacker, "POST", `/wallets/${victim.address}:withdraw`, {
      recipientAddress: to,
      amount: "1000",
      token: "ETH",
    });
    expect(after.body.code).toBe("WALLET_NOT_OWNED");
    expect(await balance(victim.address)).toBe(parseEther("1"));
    expect(await balance(to)).toBe(0n);
  });

  it("cannot register a deployed contract without a working owner() (reverting, or answering no data)", async () => {
    const noData = await deployHostileFactory({ claim: newAddress() }); // its fallback answers owner() with nothing
    const someone = await signIn(http);
    for (const claim of [devnet().factory, noData]) {
      const hostile = await deployHostileFactory({ claim });
      const res = await call(someone, "POST", "/wallets", { salt: "0", factoryAddress: hostile });
      expect({ claim, status: res.status, code: res.body.code }).toEqual({ claim, status: 400, code: "INVALID_FACTORY" });
    }
  });
});

describe("a genuine factory that is not known", () => {
  it("registers its getAddress answer, refuses to sign until the account is deployed, then withdraws", async () => {
    const d = devnet();
    const owner = await signIn(http);
    const registered = await call(owner, "POST", "/wallets", { salt: "3", factoryAddress: otherFactory });
    expect(registered.status).toBe(201);
    const wallet = registered.body.address as Address;
    expect(wallet).toBe(await getAccountAddress(d.client, { factory: otherFactory, owner: owner.owner, salt: 3n }));
    expect(registered.body.factoryAddress).toBe(otherFactory);
    await setBalance(wallet, parseEther("1"));

    const to = newAddress();
    const undeployed = await call(owner, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "1000", token: "ETH" });
    expect(undeployed.status).toBe(400);
    expect(undeployed.body.code).toBe("WALLET_NOT_OWNED");
    expect(await code(wallet)).toBeUndefined(); // no init code was built for it

    await createAccountThrough(otherFactory, owner.owner, 3n);
    expect((await call(owner, "POST", "/wallets", { salt: "3", factoryAddress: otherFactory })).status).toBe(200);
    const res = await call(owner, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "1000", token: "ETH" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "confirmed", smartWalletAddress: wallet, amount: "1000" });
    expect(await balance(to)).toBe(1000n);
  });
});

describe("a factory listed in knownFactories", () => {
  it("derives the address offline (equal to its getAddress) and deploys the account through init code on the first withdrawal", async () => {
    const d = devnet();
    const owner = await signIn(http);
    const registered = await call(owner, "POST", "/wallets", { salt: "4", factoryAddress: knownFactory });
    expect(registered.status).toBe(201);
    const wallet = registered.body.address as Address;
    expect(wallet).toBe(await getAccountAddress(d.client, { factory: knownFactory, owner: owner.owner, salt: 4n }));
    await setBalance(wallet, parseEther("1"));
    expect(await code(wallet)).toBeUndefined();

    const to = newAddress();
    const res = await call(owner, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "2000", token: "ETH" });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("confirmed");
    expect(await code(wallet)).not.toBeUndefined();
    expect(await balance(to)).toBe(2000n);
  });
});

describe("withdraw token checks", () => {
  it("answers WITHDRAW_BAD_TOKEN for a contract that is not an ERC-20 (balanceOf reverts, or answers no data)", async () => {
    const owner = await signIn(http);
    const { body } = await call(owner, "POST", "/wallets", { salt: "5" });
    await setBalance(body.address, parseEther("1"));
    const noData = await deployHostileFactory({ claim: newAddress() });
    for (const token of [devnet().factory, noData]) {
      const res = await call(owner, "POST", `/wallets/${body.address}:withdraw`, { recipientAddress: newAddress(), amount: "1", token });
      expect({ token, status: res.status, code: res.body.code }).toEqual({ token, status: 400, code: "WITHDRAW_BAD_TOKEN" });
    }
  });
});

describe("the signing gate", () => {
  const op = (sender: Address, init?: { factory: Address; factoryData: Hex }): UserOperationV07 => ({
    sender,
    nonce: 0n,
    ...init,
    callData: "0x",
    callGasLimit: 0n,
    verificationGasLimit: 0n,
    preVerificationGas: 0n,
    maxFeePerGas: 0n,
    maxPriorityFeePerGas: 0n,
    signature: "0x",
  });

  async function knownWallet(): Promise<SignableWallet> {
    const owner = newAddress();
    const factory = getAddress(devnet().factory);
    const address = await getAccountAddress(devnet().client, { factory, owner, salt: 9n });
    const record: WalletRecord = { owner, chainId: 31337, address, salt: "9", factoryAddress: factory, isHidden: false, createdAt: 0 };
    return verifySignable(record, chainSettings(31337));
  }

  it("signs only the verified wallet's operations, with init code only from its own known factory", async () => {
    const chain = chainSettings(31337);
    const signable = await knownWallet();
    expect(signable).toMatchObject({ known: true, deployed: false });
    const initCode = { factory: signable.factory, factoryData: encodeCreateAccount(signable.owner, signable.salt) };
    const signed = await signWalletOperation(signable, op(signable.address, initCode), chain);
    expect(signed.signature).toMatch(/^0x[0-9a-f]{130}$/);

    await expect(signWalletOperation(signable, op(newAddress()), chain)).rejects.toThrow(/sender/);
    await expect(signWalletOperation(signable, op(signable.address, { ...initCode, factory: otherFactory }), chain)).rejects.toThrow(
      /init code/,
    );
    await expect(
      signWalletOperation(signable, op(signable.address, { ...initCode, factoryData: encodeCreateAccount(newAddress(), 9n) }), chain),
    ).rejects.toThrow(/init code/);
    await expect(signWalletOperation({ ...signable }, op(signable.address), chain)).rejects.toThrow(/verifySignable/);
  });

  it("refuses a wallet of a factory that is not known while its account is not deployed", async () => {
    const record: WalletRecord = {
      owner: newAddress(),
      chainId: 31337,
      address: newAddress(),
      salt: "0",
      factoryAddress: otherFactory,
      isHidden: false,
      createdAt: 0,
    };
    await expect(verifySignable(record, chainSettings(31337))).rejects.toMatchObject({ status: 400, code: "WALLET_NOT_OWNED" });
    await expect(verifySignable({ ...record, factoryAddress: zeroAddress }, chainSettings(31337))).rejects.toMatchObject({
      code: "WALLET_NOT_OWNED",
    });
  });
});
