/**
 * Local ERC-4337 devnet: anvil (chain 31337) + EntryPoint v0.7 + ControlledAccountFactory +
 * VerifyingPaymaster + Alto bundler, all on free loopback ports and listening on 127.0.0.1 only.
 *
 *   const devnet = await startDevnet({ controllerPrivateKey });
 *   ... devnet.rpcUrl, devnet.bundlerUrl, devnet.factory ...
 *   await devnet.stop();
 *
 * - anvil mines every transaction immediately AND a block every `blockTimeSeconds`
 *   (`--block-time N --mixed-mining`).
 * - With `stateDir`, chain state lives in `<stateDir>/anvil-state.json` (`--state`, dumped on
 *   SIGTERM and every STATE_INTERVAL_SECONDS), so a restart keeps contracts and balances.
 * - Contracts are deployed through the CREATE2 deployer, so addresses are deterministic:
 *   EntryPoint at the canonical 0x0000000071727De22E5E9d8BAf0edAc6f37da032, factory/paymaster
 *   depend only on (controller, paymaster signer). Deployment is idempotent.
 * - Anvil dev accounts (mnemonic "test ... junk"): #0 deploys and funds, #8 is Alto's executor,
 *   #9 Alto's utility key. Do not use #8/#9 elsewhere (nonce races with the bundler).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  concat,
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  http,
  parseEther,
  zeroHash,
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
  type Account,
  type Chain,
  type Transport,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";
import {
  artifacts,
  CREATE2_DEPLOYER,
  CREATE2_DEPLOYER_RUNTIME_CODE,
  ENTRYPOINT_V07_SALT,
  entryPoint07Abi,
  entryPoint07Address,
  loadEntryPointArtifact,
  loadVerifyingPaymasterArtifact,
  verifyingPaymasterAbi,
} from "./contracts/index";

export interface DevnetInfo {
  chainId: number;
  rpcUrl: string;
  bundlerUrl: string;
  entryPoint: Address;
  factory: Address;
  paymaster: Address;
  controller: Address;
  create2Deployer: Address;
}

export interface Devnet extends DevnetInfo {
  stop(): Promise<void>;
}

export interface StartDevnetOptions {
  /** Persist anvil state in `<stateDir>/anvil-state.json`; undefined = ephemeral chain. */
  stateDir?: string;
  /** Key of the account controller (its address goes into the factory). */
  controllerPrivateKey: Hex;
  /** Key of the VerifyingPaymaster's signer; defaults to the controller key. */
  paymasterSignerPrivateKey?: Hex;
  /** Interval mining period in seconds (transactions are also mined immediately). Default 2. */
  blockTimeSeconds?: number;
  /** Receives anvil/alto/devnet log lines (prefixed). Quiet when omitted. */
  log?: (line: string) => void;
}

export const DEVNET_CHAIN_ID = 31337;
/** Well-known anvil dev keys (mnemonic "test test ... junk"). */
export const ANVIL_KEYS = {
  /** #0: deployer / funder, owner of the paymaster. */
  deployer: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  /** #8: Alto executor. */
  bundlerExecutor: "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
  /** #9: Alto utility wallet (deploys Alto's simulation contracts). */
  bundlerUtility: "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
} as const satisfies Record<string, Hex>;

/** CREATE2 salt of our factory and paymaster (addresses still depend on constructor args). */
export const DEVNET_SALT: Hex = zeroHash;
export const PAYMASTER_UNSTAKE_DELAY_SECONDS = 86_400;
const PAYMASTER_STAKE = parseEther("1");
const PAYMASTER_MIN_DEPOSIT = parseEther("10");
const PAYMASTER_DEPOSIT = parseEther("100");
const CONTROLLER_MIN_BALANCE = parseEther("10");
const CONTROLLER_FUNDING = parseEther("100");
const BUNDLER_MIN_BALANCE = parseEther("100");
const BUNDLER_FUNDING = parseEther("1000");
const STATE_INTERVAL_SECONDS = 5;

const binDir = join(dirname(fileURLToPath(import.meta.url)), "../../node_modules/.bin");
/** Alto's CLI script, run with this Node (one process, handles SIGTERM itself). */
const altoScript = (): string => realpathSync(join(binDir, "alto"));
/**
 * Alto hard-codes `listen({ host: "0.0.0.0" })`; this preload (`node --import`) makes every server of its
 * process listen on 127.0.0.1 instead.
 */
const loopbackPreload = (): string =>
  pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "../../local/loopback/listen-loopback.mjs")).href;

/**
 * The real anvil executable. node_modules/.bin/anvil is a Node wrapper that, on SIGTERM, forwards
 * the signal and exits at once without waiting for anvil (so "stopped" would not mean "state
 * dumped"), and on SIGKILL orphans anvil. Run the platform binary directly; fall back to the
 * wrapper when the platform package is not installed.
 */
function anvilBinary(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  try {
    const path = createRequire(import.meta.url).resolve(`@foundry-rs/anvil-${process.platform}-${arch}/bin/${exe}`);
    if (existsSync(path)) return path;
  } catch {
    // fall through
  }
  return join(binDir, "anvil");
}

/** Constructor-args-included init code of the factory for a controller. */
export function factoryInitCode(entryPoint: Address, controller: Address): Hex {
  return concat([
    artifacts.ControlledAccountFactory.bytecode,
    encodeAbiParameters([{ type: "address" }, { type: "address" }], [entryPoint, controller]),
  ]);
}

/** Init code of the VerifyingPaymaster for a signer. */
export function paymasterInitCode(entryPoint: Address, signer: Address): Hex {
  return concat([
    loadVerifyingPaymasterArtifact().bytecode,
    encodeAbiParameters([{ type: "address" }, { type: "address" }], [entryPoint, signer]),
  ]);
}

/** Deterministic devnet addresses for a controller / paymaster signer, without starting anything. */
export function devnetAddresses(controller: Address, paymasterSigner: Address = controller) {
  const create2 = (salt: Hex, bytecode: Hex) =>
    getContractAddress({ opcode: "CREATE2", from: CREATE2_DEPLOYER, salt, bytecode });
  const entryPoint = entryPoint07Address;
  return {
    entryPoint,
    factory: create2(DEVNET_SALT, factoryInitCode(entryPoint, controller)),
    paymaster: create2(DEVNET_SALT, paymasterInitCode(entryPoint, paymasterSigner)),
  };
}

export async function startDevnet(opts: StartDevnetOptions): Promise<Devnet> {
  const started = Date.now();
  const log = opts.log;
  const note = (line: string) => log?.(`[devnet] ${line}`);
  const blockTime = opts.blockTimeSeconds ?? 2;
  const controller = privateKeyToAccount(opts.controllerPrivateKey).address;
  const paymasterSigner = privateKeyToAccount(opts.paymasterSignerPrivateKey ?? opts.controllerPrivateKey).address;

  const procs: Managed[] = [];
  const stopAll = async () => {
    // Bundler first (it talks to anvil), then anvil (which dumps its state on SIGTERM).
    for (const p of [...procs].reverse()) await p.stop();
  };
  try {
    // ---- anvil ----
    const anvilArgs = ["--host", "127.0.0.1", "--chain-id", String(DEVNET_CHAIN_ID)];
    anvilArgs.push("--block-time", String(blockTime), "--mixed-mining");
    // Prague: Osaka's EIP-7825 per-tx gas cap (2^24) trips bundler simulations with big limits.
    anvilArgs.push("--hardfork", "prague");
    if (opts.stateDir) {
      mkdirSync(opts.stateDir, { recursive: true });
      anvilArgs.push("--state", join(opts.stateDir, "anvil-state.json"));
      anvilArgs.push("--state-interval", String(STATE_INTERVAL_SECONDS));
    }
    const { proc: anvil, url: rpcUrl } = await startWithFreePort("anvil", log, async (port) => {
      const proc = spawnManaged("anvil", anvilBinary(), [...anvilArgs, "--port", String(port)], log, anvilLogFilter());
      const url = `http://127.0.0.1:${port}`;
      await waitFor(proc, 30_000, async () => (await rpc(url, "eth_chainId", [])) !== undefined);
      return { proc, url };
    });
    procs.push(anvil);
    note(`anvil ready at ${rpcUrl} (${Date.now() - started} ms)`);

    // ---- contracts ----
    const publicClient = createPublicClient({ chain: foundry, transport: http(rpcUrl), pollingInterval: 50 });
    const deployer = privateKeyToAccount(ANVIL_KEYS.deployer);
    const wallet = createWalletClient({ chain: foundry, transport: http(rpcUrl), account: deployer });
    const addresses = await deployContracts(publicClient, wallet, { controller, paymasterSigner, note });
    await fundAccounts(publicClient, wallet, controller, note);
    note(`contracts ready (${Date.now() - started} ms)`);

    // ---- alto ----
    const altoArgs = [
      "--entrypoints", addresses.entryPoint,
      "--rpc-url", rpcUrl,
      "--executor-private-keys", ANVIL_KEYS.bundlerExecutor,
      "--utility-private-key", ANVIL_KEYS.bundlerUtility,
      "--safe-mode", "false",
      "--deploy-simulations-contract", "true",
      // Poll the node often (alto's viem polling interval is block-time / 4): receipts arrive
      // right after the handleOps transaction is auto-mined.
      "--block-time", "200",
      "--min-bundle-interval", "50",
      "--max-bundle-interval", "200",
      // A withdrawal answered "pending" may be followed by the same wallet's next nonce: queue it.
      "--mempool-max-queued-ops", "10",
      "--utility-wallet-monitor", "false",
      "--refilling-wallets", "false",
      "--log-level", log ? "info" : "warn",
      "--public-client-log-level", "warn",
      "--wallet-client-log-level", "warn",
      "--json", "true",
    ];
    const { proc: alto, url: bundlerUrl } = await startWithFreePort("alto", log, async (port) => {
      const proc = spawnManaged("alto", process.execPath, ["--import", loopbackPreload(), altoScript(), ...altoArgs, "--port", String(port)], log);
      const url = `http://127.0.0.1:${port}`;
      await waitFor(proc, 60_000, async () => {
        const eps = (await rpc(url, "eth_supportedEntryPoints", [])) as string[] | undefined;
        return Array.isArray(eps) && eps.some((e) => e.toLowerCase() === addresses.entryPoint.toLowerCase());
      });
      return { proc, url };
    });
    procs.push(alto);
    note(`alto ready at ${bundlerUrl}; devnet started in ${Date.now() - started} ms`);

    let stopped: Promise<void> | undefined;
    return {
      chainId: DEVNET_CHAIN_ID,
      rpcUrl,
      bundlerUrl,
      ...addresses,
      controller,
      create2Deployer: CREATE2_DEPLOYER,
      stop: () => (stopped ??= stopAll()),
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Contracts

type Wallet = WalletClient<Transport, Chain, Account>;

async function hasCode(client: PublicClient, address: Address): Promise<boolean> {
  const code = await client.getCode({ address });
  return code !== undefined && code !== "0x";
}

async function sendAndWait(client: PublicClient, wallet: Wallet, tx: Parameters<Wallet["sendTransaction"]>[0]) {
  const hash = await wallet.sendTransaction(tx);
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== "success") throw new Error(`devnet: transaction ${hash} reverted`);
  return receipt;
}

async function deployCreate2(
  client: PublicClient,
  wallet: Wallet,
  name: string,
  salt: Hex,
  initCode: Hex,
  note: (l: string) => void,
): Promise<Address> {
  const address = getContractAddress({ opcode: "CREATE2", from: CREATE2_DEPLOYER, salt, bytecode: initCode });
  if (await hasCode(client, address)) return address;
  await sendAndWait(client, wallet, { to: CREATE2_DEPLOYER, data: concat([salt, initCode]) });
  if (!(await hasCode(client, address))) throw new Error(`devnet: CREATE2 deployment of ${name} failed`);
  note(`deployed ${name} at ${address}`);
  return address;
}

async function deployContracts(
  client: PublicClient,
  wallet: Wallet,
  { controller, paymasterSigner, note }: { controller: Address; paymasterSigner: Address; note: (l: string) => void },
) {
  if (!(await hasCode(client, CREATE2_DEPLOYER))) {
    await client.request({
      method: "anvil_setCode" as never,
      params: [CREATE2_DEPLOYER, CREATE2_DEPLOYER_RUNTIME_CODE] as never,
    });
  }
  const entryPoint = await deployCreate2(
    client, wallet, "EntryPoint v0.7", ENTRYPOINT_V07_SALT, loadEntryPointArtifact().bytecode, note,
  );
  if (entryPoint.toLowerCase() !== entryPoint07Address.toLowerCase()) {
    throw new Error(`devnet: EntryPoint landed at ${entryPoint}, expected ${entryPoint07Address}`);
  }
  const factory = await deployCreate2(
    client, wallet, "ControlledAccountFactory", DEVNET_SALT, factoryInitCode(entryPoint, controller), note,
  );
  const paymaster = await deployCreate2(
    client, wallet, "VerifyingPaymaster", DEVNET_SALT, paymasterInitCode(entryPoint, paymasterSigner), note,
  );

  // The paymaster's Ownable owner is its deployer, i.e. the CREATE2 deployer contract: hand
  // ownership to anvil account #0 (by impersonation) so it can stake and withdraw.
  const owner = await client.readContract({ address: paymaster, abi: verifyingPaymasterAbi, functionName: "owner" });
  if (owner.toLowerCase() === CREATE2_DEPLOYER.toLowerCase()) {
    await anvil(client, "anvil_setBalance", [CREATE2_DEPLOYER, "0xde0b6b3a7640000"]);
    await anvil(client, "anvil_impersonateAccount", [CREATE2_DEPLOYER]);
    try {
      const impersonated = createWalletClient({
        chain: wallet.chain,
        transport: http(wallet.transport.url as string),
        account: CREATE2_DEPLOYER,
      });
      const hash = await impersonated.writeContract({
        address: paymaster,
        abi: verifyingPaymasterAbi,
        functionName: "transferOwnership",
        args: [wallet.account.address],
      });
      const r = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      if (r.status !== "success") throw new Error("devnet: paymaster transferOwnership reverted");
    } finally {
      await anvil(client, "anvil_stopImpersonatingAccount", [CREATE2_DEPLOYER]);
    }
    note(`paymaster owner is now ${wallet.account.address}`);
  }

  const info = await client.readContract({
    address: entryPoint, abi: entryPoint07Abi, functionName: "getDepositInfo", args: [paymaster],
  });
  if (!info.staked) {
    await sendAndWait(client, wallet, {
      to: paymaster,
      value: PAYMASTER_STAKE,
      data: encodeFunctionData({
        abi: verifyingPaymasterAbi, functionName: "addStake", args: [PAYMASTER_UNSTAKE_DELAY_SECONDS],
      }),
    });
    note(`paymaster staked (${PAYMASTER_UNSTAKE_DELAY_SECONDS}s unstake delay)`);
  }
  if (info.deposit < PAYMASTER_MIN_DEPOSIT) {
    await sendAndWait(client, wallet, { to: paymaster, value: PAYMASTER_DEPOSIT, data: encodeFunctionData({ abi: verifyingPaymasterAbi, functionName: "deposit" }) });
    note("paymaster deposit topped up");
  }
  return { entryPoint, factory, paymaster };
}

async function fundAccounts(client: PublicClient, wallet: Wallet, controller: Address, note: (l: string) => void) {
  const targets: [Address, bigint, bigint][] = [
    [controller, CONTROLLER_MIN_BALANCE, CONTROLLER_FUNDING],
    [privateKeyToAccount(ANVIL_KEYS.bundlerExecutor).address, BUNDLER_MIN_BALANCE, BUNDLER_FUNDING],
    [privateKeyToAccount(ANVIL_KEYS.bundlerUtility).address, BUNDLER_MIN_BALANCE, BUNDLER_FUNDING],
  ];
  for (const [address, min, amount] of targets) {
    if ((await client.getBalance({ address })) < min) {
      await sendAndWait(client, wallet, { to: address, value: amount });
      note(`funded ${address}`);
    }
  }
}

async function anvil(client: PublicClient, method: string, params: unknown[]): Promise<unknown> {
  return client.request({ method: method as never, params: params as never });
}

// ---------------------------------------------------------------------------------------------
// Processes

interface Managed {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
  isExited(): boolean;
  recent(): string;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHooksInstalled = false;

/** Children die with the parent: on 'exit' (sync SIGKILL) and on fatal signals. */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", () => {
    for (const c of live) c.kill("SIGKILL");
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = () => {
      // A host with its own handler (npm start) shuts down gracefully and stops the devnet itself,
      // which lets anvil dump its state; only an unhandled signal kills the children at once.
      if (process.listenerCount(sig) > 1) return;
      for (const c of live) c.kill("SIGKILL");
      process.removeListener(sig, handler);
      process.kill(process.pid, sig);
    };
    process.on(sig, handler);
  }
}

/** Drops anvil's startup banner (accounts, keys) and its one-line-per-RPC-call method names. */
function anvilLogFilter(): (line: string) => boolean {
  let bannerDone = false;
  return (line) => {
    if (!bannerDone) {
      bannerDone = line.startsWith("Listening on");
      return bannerDone;
    }
    return !/^\s*[a-z0-9]+_[A-Za-z0-9_]+\s*$/.test(line);
  };
}

function spawnManaged(
  name: string,
  bin: string,
  args: string[],
  log?: (l: string) => void,
  filter: (line: string) => boolean = () => true,
): Managed {
  installExitHooks();
  // Own process group: a Ctrl-C in the terminal reaches the host only, which then stops us in order.
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: process.env, detached: true });
  live.add(child);
  const tail: string[] = [];
  let done = false;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true;
      live.delete(child);
      log?.(`[${name}] exited (${signal ?? code})`);
      resolve();
    });
    child.once("error", (err) => {
      tail.push(String(err));
      done = true;
      live.delete(child);
      resolve();
    });
  });
  // Always drain stdout/stderr (a full pipe would block the child); keep a tail for errors.
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      tail.push(line);
      if (tail.length > 40) tail.shift();
      if (log && filter(line)) log(`[${name}] ${line}`);
    });
  }
  return {
    name,
    child,
    exited,
    isExited: () => done,
    recent: () => tail.join("\n"),
    async stop() {
      if (done) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A free TCP port on the loopback interface (the local runtime uses it too). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Start a process on a free port, retrying with a new port if it dies (e.g. port taken meanwhile). */
async function startWithFreePort<T extends { proc: Managed }>(
  name: string,
  log: ((l: string) => void) | undefined,
  start: (port: number) => Promise<T>,
): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await start(port);
    } catch (e) {
      lastError = e;
      log?.(`[devnet] ${name} failed to start on port ${port}: ${(e as Error).message}`);
    }
  }
  throw lastError;
}

/** Poll `ready` until true; fail fast (with the process' last output) if the process exits. */
async function waitFor(proc: Managed, timeoutMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.isExited()) throw new Error(`${proc.name} exited during startup:\n${proc.recent()}`);
    if (await ready().catch(() => false)) {
      // Make sure it was our process that answered (not another one that grabbed the port).
      await new Promise((r) => setTimeout(r, 50));
      if (proc.isExited()) throw new Error(`${proc.name} exited during startup:\n${proc.recent()}`);
      return;
    }
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`${proc.name} not ready after ${timeoutMs} ms:\n${proc.recent()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(2_000),
  });
  if (!res.ok) return undefined;
  const body = (await res.json()) as { result?: unknown };
  return body.result;
}
