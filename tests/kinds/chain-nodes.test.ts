/**
 * The chain-reading node kinds and simulated writes against the real devnet (API.md §8.4.1-§8.4.3,
 * §8.4.10): contractRead outputs decoded as §8.4.3 says (integers as decimal strings, addresses EIP-55,
 * several outputs keyed by name or output<i>, tuples as objects), CALL_REVERTED and RPC_ERROR with
 * "<k> of <n> method calls failed"; balance (native, ERC-20 metadata or null, a refusing balanceOf);
 * contractWrite simulated with eth_call from the runner and ethTransfer simulated as a balance check.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { getAddress, type Address } from "viem";
import { privateKeyToAddress, generatePrivateKey } from "viem/accounts";
import { compileContract, deployTestToken, devnet, fundedAccount, setBalance, testTokenAbi } from "../support/chain";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { fakeSender, run, stepOf, type Body } from "../engine/engine-support";

const PROBE_SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract Probe {
    struct Pos { uint256 x; address who; }
    uint256 public counter;
    function pair() external view returns (uint256 amount, address caller) { return (42, msg.sender); }
    function unnamed() external pure returns (uint8, bool) { return (7, true); }
    function pos() external view returns (Pos memory) { return Pos(5, address(this)); }
    function list() external pure returns (int256[] memory l) { l = new int256[](2); l[0] = -1; l[1] = 2; }
    function fail() external pure returns (uint256) { revert("nope"); }
    function echo(bytes32 b, string calldata s, uint16[] calldata n) external pure returns (bytes32, string memory, uint16[] memory) { return (b, s, n); }
    function bump(uint256 by) external returns (uint256) { require(by > 0, "zero"); counter += by; return counter; }
}`;

const probeAbi = [
  {
    type: "function",
    name: "pair",
    stateMutability: "view",
    inputs: [],
    outputs: [
      { name: "amount", type: "uint256" },
      { name: "caller", type: "address" },
    ],
  },
  { type: "function", name: "unnamed", stateMutability: "pure", inputs: [], outputs: [{ type: "uint8" }, { type: "bool" }] },
  {
    type: "function",
    name: "pos",
    stateMutability: "view",
    inputs: [],
    outputs: [
      {
        type: "tuple",
        components: [
          { name: "x", type: "uint256" },
          { name: "who", type: "address" },
        ],
      },
    ],
  },
  { type: "function", name: "list", stateMutability: "pure", inputs: [], outputs: [{ name: "l", type: "int256[]" }] },
  { type: "function", name: "fail", stateMutability: "pure", inputs: [], outputs: [{ type: "uint256" }] },
  {
    type: "function",
    name: "echo",
    stateMutability: "pure",
    inputs: [{ type: "bytes32" }, { type: "string" }, { type: "uint16[]" }],
    outputs: [{ type: "bytes32" }, { type: "string" }, { type: "uint16[]" }],
  },
  {
    type: "function",
    name: "bump",
    stateMutability: "nonpayable",
    inputs: [{ name: "by", type: "uint256" }],
    outputs: [{ type: "uint256" }],
  },
  { type: "function", name: "counter", stateMutability: "view", inputs: [], outputs: [{ type: "uint256" }] },
];
const tokenAbi = [
  ...testTokenAbi,
  {
    type: "function",
    name: "transfer",
    stateMutability: "nonpayable",
    inputs: [{ type: "address" }, { type: "uint256" }],
    outputs: [{ type: "bool" }],
  },
  { type: "function", name: "decimals", stateMutability: "view", inputs: [], outputs: [{ type: "uint8" }] },
];

const DEAD_CHAIN = 4242;
let probe: Address;
let token: Awaited<ReturnType<typeof deployTestToken>>;
let runner: Address;
let tokenAddress: Address;

beforeAll(async () => {
  const chains = JSON.parse(stackEnv().CHAINS ?? "[]") as unknown[];
  await useTestRuntime({ CHAINS: JSON.stringify([...chains, { chainId: DEAD_CHAIN, rpcUrl: "http://127.0.0.1:1" }]) });
  token = await deployTestToken();
  const { wallet } = await fundedAccount();
  const hash = await wallet.deployContract({ abi: probeAbi, bytecode: compileContract("Probe", PROBE_SOURCE) });
  probe = getAddress((await devnet().client.waitForTransactionReceipt({ hash })).contractAddress!);
  tokenAddress = getAddress(token.address);
  runner = privateKeyToAddress(generatePrivateKey());
}, 120_000);

const withRunner = (overrides: Parameters<typeof run>[1] = {}) => ({
  context: {
    workflowId: "01JWORKFLOW0000000000000000",
    executionId: "01JEXECUTION000000000000000",
    executionIndex: 0,
    owner: runner,
    smartWalletAddress: runner,
    chainId: 31337,
  },
  ...overrides,
});
const single = (node: Record<string, unknown>): Body => ({ nodes: [node], inputVariables: { settings: { runner } } });
/** The one-node bodies: a contractRead `read`, a contractWrite `w`. */
const read = (config: Record<string, unknown>) => single({ id: "read", name: "read", type: "contractRead", config });
const write = (config: Record<string, unknown>) => single({ id: "w", name: "w", type: "contractWrite", config });
/** The Probe's `pair()` element as contractRead reports it. */
const pairRead = () => ({
  methodName: "pair",
  contractAddress: probe,
  success: true,
  value: { amount: "42", caller: "0x0000000000000000000000000000000000000000" },
});

describe("contractRead", () => {
  it("decodes single and several outputs, tuples and arrays, addresses EIP-55, integers as decimal strings", async () => {
    const holder = privateKeyToAddress(generatePrivateKey());
    await token.mint(holder, 1234n);
    const ok = await run(
      read({
        contractAddress: probe,
        contractAbi: [...probeAbi, ...tokenAbi],
        methodCalls: [
          { methodName: "pair" },
          { methodName: "unnamed" },
          { methodName: "pos" },
          { methodName: "list" },
          {
            methodName: "echo(bytes32,string,uint16[])",
            methodParams: [`0x${"ab".repeat(32)}`, "hello {{trigger1.data.greeting}}", '[1, "0x10"]'],
          },
          { methodName: "balanceOf", contractAddress: "{{tokenAddress}}", methodParams: ["{{holder}}"] },
        ],
      }),
      { triggerInput: { tokenAddress: tokenAddress.toLowerCase(), holder } },
    );
    const step = stepOf(ok.steps, "read")!;
    expect(step.success).toBe(true);
    expect(step.output.data).toEqual([
      pairRead(),
      { methodName: "unnamed", contractAddress: probe, success: true, value: { output0: "7", output1: true } },
      { methodName: "pos", contractAddress: probe, success: true, value: { x: "5", who: getAddress(probe) } },
      { methodName: "list", contractAddress: probe, success: true, value: ["-1", "2"] },
      {
        methodName: "echo(bytes32,string,uint16[])",
        contractAddress: probe,
        success: true,
        value: { output0: `0x${"ab".repeat(32)}`, output1: "hello hi", output2: ["1", "16"] },
      },
      { methodName: "balanceOf", contractAddress: tokenAddress, success: true, value: "1234" },
    ]);
    expect(step.inputs).toEqual(["trigger1.data.greeting", "holder", "tokenAddress"]);
  });

  it('fails CALL_REVERTED "<k> of <n> method calls failed", still listing every element with the revert reason', async () => {
    const result = await run(
      read({ contractAddress: probe, contractAbi: probeAbi, methodCalls: [{ methodName: "pair" }, { methodName: "fail" }] }),
    );
    const step = stepOf(result.steps, "read")!;
    expect(step).toMatchObject({ success: false, errorCode: "CALL_REVERTED", error: "1 of 2 method calls failed" });
    expect(step.output.data).toEqual([
      pairRead(),
      { methodName: "fail", contractAddress: probe, success: false, error: "execution reverted: nope", value: null },
    ]);
  });

  it("fails RPC_ERROR when the chain's RPC is unreachable, the message without the RPC URL", async () => {
    const result = await run(
      read({ chainId: DEAD_CHAIN, contractAddress: probe, contractAbi: probeAbi, methodCalls: [{ methodName: "pair" }] }),
    );
    const step = stepOf(result.steps, "read")!;
    expect(step).toMatchObject({ success: false, errorCode: "RPC_ERROR", error: "1 of 1 method calls failed" });
    expect(JSON.stringify(step)).not.toContain("127.0.0.1:1");
  });
});

describe("balance", () => {
  it("lists the native balance then each token with symbol and decimals read from it (null when missing)", async () => {
    const who = privateKeyToAddress(generatePrivateKey());
    await setBalance(who, 5_000_000n);
    await token.mint(who, 77n);
    const result = await run(
      single({ id: "bal", name: "bal", type: "balance", config: { address: "{{who}}", chain: "31337", tokenAddresses: [tokenAddress] } }),
      { triggerInput: { who: who.toLowerCase() } },
    );
    const step = stepOf(result.steps, "bal")!;
    expect(step.success).toBe(true);
    expect(step.output.data).toEqual([
      { tokenAddress: null, symbol: "ETH", decimals: 18, balance: "5000000" },
      { tokenAddress: tokenAddress, symbol: null, decimals: 18, balance: "77" },
    ]);
  });

  it("fails CALL_REVERTED when a listed token's balanceOf refuses, and INVALID_INPUT on a non-address", async () => {
    const refused = await run(single({ id: "bal", name: "bal", type: "balance", config: { address: runner, tokenAddresses: [probe] } }));
    expect(stepOf(refused.steps, "bal")).toMatchObject({ success: false, errorCode: "CALL_REVERTED" });
    const bad = await run(single({ id: "bal", name: "bal", type: "balance", config: { address: "{{trigger1.data.greeting}}" } }));
    expect(stepOf(bad.steps, "bal")).toMatchObject({ errorCode: "INVALID_INPUT", error: "address is not an address" });
  });
});

describe("simulated writes", () => {
  it("contractWrite isSimulated runs eth_call from the runner, outputs the decoded return values and sends nothing", async () => {
    const sender = fakeSender();
    await token.mint(runner, 10n);
    const result = await run(
      write({
        contractAddress: probe,
        contractAbi: [...probeAbi, ...tokenAbi],
        isSimulated: true,
        methodCalls: [
          { methodName: "bump", methodParams: ["3"] },
          { methodName: "transfer", methodParams: [probe, "10"], contractAddress: tokenAddress },
        ],
      }),
      withRunner({ sendCalls: sender.send }),
    );
    const step = stepOf(result.steps, "w")!;
    expect(sender.requests).toEqual([]);
    expect(step.success).toBe(true);
    expect(step.output.data).toEqual([
      { methodName: "bump", contractAddress: probe, success: true, value: "3", isSimulated: true },
      { methodName: "transfer", contractAddress: tokenAddress, success: true, value: true, isSimulated: true },
    ]);
    expect(step.gasUsed).toBeUndefined();
    expect(result.cogs).toEqual([]);
    expect(await devnet().client.readContract({ address: probe, abi: probeAbi, functionName: "counter" })).toBe(0n);
  });

  it("in simulate mode every write is simulated; a reverting call fails CALL_REVERTED with its reason", async () => {
    const sender = fakeSender();
    const result = await run(
      write({
        contractAddress: tokenAddress,
        contractAbi: tokenAbi,
        methodCalls: [{ methodName: "transfer", methodParams: [probe, "999999"] }],
      }),
      withRunner({ mode: "simulate", sendCalls: sender.send }),
    );
    expect(sender.requests).toEqual([]);
    const step = stepOf(result.steps, "w")!;
    expect(step).toMatchObject({ success: false, errorCode: "CALL_REVERTED", error: "1 of 1 method calls failed" });
    expect(step.output.data).toEqual([
      {
        methodName: "transfer",
        contractAddress: tokenAddress,
        success: false,
        error: "execution reverted: insufficient balance",
        value: null,
        isSimulated: true,
      },
    ]);
  });

  it("ethTransfer in simulate mode only checks the runner's balance: isSimulated, no hashes; INSUFFICIENT_BALANCE above it", async () => {
    const poor = privateKeyToAddress(generatePrivateKey());
    await setBalance(poor, 1000n);
    const transfer = (amount: string) =>
      run(single({ id: "pay", name: "pay", type: "ethTransfer", config: { destination: probe, amount } }), {
        mode: "simulate",
        context: {
          workflowId: "01JWORKFLOW0000000000000000",
          executionId: "01JEXECUTION000000000000000",
          executionIndex: 0,
          owner: poor,
          smartWalletAddress: poor,
          chainId: 31337,
        },
      });
    const ok = stepOf((await transfer("600")).steps, "pay")!;
    expect(ok.output.data).toEqual({ from: poor, to: probe, value: "600", chainId: 31337, isSimulated: true });
    const tooMuch = stepOf((await transfer("1001")).steps, "pay")!;
    expect(tooMuch).toMatchObject({
      success: false,
      errorCode: "INSUFFICIENT_BALANCE",
      output: { data: { from: poor, to: probe, value: "1001", isSimulated: true } },
    });
  });
});
