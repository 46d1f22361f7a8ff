/**
 * Devnet helpers for tests: clients, funding (anvil_setBalance, so parallel test files never race on a
 * shared sender's nonce), and a minimal ERC-20 compiled with solc-js and deployed from a fresh key.
 */
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeEventTopics,
  http,
  parseEther,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { entryPoint07Abi } from "viem/account-abstraction";
import { createRequire } from "node:module";
import { stackEnv } from "./runtime";
import type { DevnetInfo } from "../../local/devnet/devnet";
import { localTokens } from "../../local/devnet/tokens";

/** The devnet of `chainId` (the suite's stack has 31337; the `chains` project also 11155111, vitest.config.ts). */
export function devnet(chainId = 31337) {
  const chains = JSON.parse(stackEnv().CHAINS ?? "[]") as Pick<
    DevnetInfo,
    "chainId" | "rpcUrl" | "bundlerUrl" | "entryPoint" | "factory" | "paymaster"
  >[];
  const chain = chains.find((c) => c.chainId === chainId);
  if (!chain) throw new Error(`the devnet of chain ${chainId} is not running (TEST_DEVNET=0, or not the chains project?)`);
  const viemChain = {
    id: chain.chainId,
    name: `devnet ${chain.chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  } as const;
  const client = createPublicClient({ chain: viemChain, transport: http(chain.rpcUrl) }) as PublicClient;
  const testClient = createTestClient({ chain: viemChain, mode: "anvil", transport: http(chain.rpcUrl) });
  return { ...chain, viemChain, client, testClient };
}

/** The cogs element (API.md §10) of a step that sent a user operation on the devnet: the gas the step records. */
export const gasCogs = (nodeId: string, step: Record<string, unknown>) => ({
  nodeId,
  costType: "gas",
  fee: { amount: step.totalGasCost, unit: "WEI" },
  gasUnits: step.gasUsed,
  chainId: devnet().chainId,
});

export async function setBalance(address: Address, wei: bigint, chainId?: number) {
  await devnet(chainId).testClient.setBalance({ address, value: wei });
}

/**
 * Every user operation the EntryPoint included from `sender` (its UserOperationEvent logs), oldest first, with the
 * nonce's key and sequence (API.md §19: the service sends each operation under a key of its own).
 */
export async function includedOperations(sender: Address) {
  const d = devnet();
  const logs = await d.client.getContractEvents({
    address: d.entryPoint,
    abi: entryPoint07Abi,
    eventName: "UserOperationEvent",
    args: { sender },
    fromBlock: 0n,
  });
  return logs.map((l) => ({
    userOpHash: l.args.userOpHash!,
    key: l.args.nonce! >> 64n,
    sequence: l.args.nonce! & ((1n << 64n) - 1n),
    success: l.args.success!,
    transactionHash: l.transactionHash,
  }));
}

/** A fresh EOA with 10 ETH on chain `chainId` (default 31337) for sending its own transactions. */
export async function fundedAccount(chainId?: number) {
  const privateKey = generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  await setBalance(account.address, parseEther("10"), chainId);
  const d = devnet(chainId);
  return { privateKey, account, wallet: createWalletClient({ account, chain: d.viemChain, transport: http(d.rpcUrl) }) };
}

/**
 * A token planted at its public address on a local chain (local/devnet/tokens.ts, e.g. USDC on 11155111): its
 * address and metadata, `mint` (open on local chains) from a fresh funded key, and `balanceOf`.
 */
export async function plantedToken(symbol: string, chainId = 31337) {
  const token = localTokens(chainId).find((t) => t.symbol === symbol);
  if (!token) throw new Error(`no ${symbol} is planted on chain ${chainId}`);
  const { wallet } = await fundedAccount(chainId);
  const client = devnet(chainId).client;
  const address = token.address;
  return {
    ...token,
    /** Mints `amount` to `to`; answers the transaction's hash once it is mined. */
    mint: async (to: Address, amount: bigint) => {
      const hash = await wallet.writeContract({ address, abi: testTokenAbi, functionName: "mint", args: [to, amount] });
      await client.waitForTransactionReceipt({ hash });
      return hash;
    },
    balanceOf: (who: Address) => client.readContract({ address, abi: testTokenAbi, functionName: "balanceOf", args: [who] }),
  };
}

const TOKEN_SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract TestToken {
    mapping(address => uint256) public balanceOf;
    event Transfer(address indexed from, address indexed to, uint256 value);
    function decimals() external pure returns (uint8) { return 18; }
    function mint(address to, uint256 amount) external { balanceOf[to] += amount; emit Transfer(address(0), to, amount); }
    function transfer(address to, uint256 amount) external returns (bool) {
        require(balanceOf[msg.sender] >= amount, "insufficient balance");
        balanceOf[msg.sender] -= amount;
        balanceOf[to] += amount;
        emit Transfer(msg.sender, to, amount);
        return true;
    }
}`;

/** The ERC-20 Transfer event, and its topic0, as the watcher tests name it. */
export const transferEvent = {
  type: "event",
  name: "Transfer",
  inputs: [
    { name: "from", type: "address", indexed: true },
    { name: "to", type: "address", indexed: true },
    { name: "value", type: "uint256", indexed: false },
  ],
} as const;
export const TRANSFER = encodeEventTopics({ abi: [transferEvent], eventName: "Transfer" })[0]!;

export const testTokenAbi = [
  { type: "function", name: "balanceOf", stateMutability: "view", inputs: [{ type: "address" }], outputs: [{ type: "uint256" }] },
  { type: "function", name: "mint", stateMutability: "nonpayable", inputs: [{ type: "address" }, { type: "uint256" }], outputs: [] },
] as const;

const compiled = new Map<string, Hex>();

/** Creation bytecode of contract `name` in `source`, compiled once per process with solc-js. */
export function compileContract(name: string, source: string): Hex {
  const cached = compiled.get(name);
  if (cached) return cached;
  const solc = createRequire(import.meta.url)("solc");
  const output = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: "Solidity",
        sources: { [`${name}.sol`]: { content: source } },
        settings: { evmVersion: "cancun", outputSelection: { "*": { "*": ["evm.bytecode.object"] } } },
      }),
    ),
  );
  const contract = output.contracts?.[`${name}.sol`]?.[name];
  if (!contract) throw new Error(`${name} did not compile: ${JSON.stringify(output.errors)}`);
  const bytecode = `0x${contract.evm.bytecode.object}` as Hex;
  compiled.set(name, bytecode);
  return bytecode;
}

const tokenBytecode = () => compileContract("TestToken", TOKEN_SOURCE);

/** Deploys a TestToken; `mint(to, amount)` is open to anyone. */
export async function deployTestToken() {
  const { wallet } = await fundedAccount();
  const client = devnet().client;
  const hash = await wallet.deployContract({ abi: testTokenAbi, bytecode: tokenBytecode() });
  const receipt = await client.waitForTransactionReceipt({ hash });
  const address = receipt.contractAddress!;
  return {
    address,
    mint: async (to: Address, amount: bigint) => {
      const tx = await wallet.writeContract({ address, abi: testTokenAbi, functionName: "mint", args: [to, amount] });
      await client.waitForTransactionReceipt({ hash: tx });
    },
    balanceOf: (who: Address) => client.readContract({ address, abi: testTokenAbi, functionName: "balanceOf", args: [who] }),
  };
}
