/**
 * Local ERC-4337 devnet: anvil (chain 31337 unless `chainId` says otherwise) + EntryPoint v0.7 +
 * ControlledAccountFactory + VerifyingPaymaster + Alto bundler (+ the chain id's well-known contracts: tokens,
 * ./tokens.ts, and price feeds, ./feeds.ts),
 * all on free loopback ports and listening on 127.0.0.1 only. Several devnets (one per chain id) run side by side.
 *
 *   const devnet = await startDevnet({ controllerPrivateKey, chainId: 11155111 });
 *   ... devnet.rpcUrl, devnet.bundlerUrl, devnet.factory, devnet.tokens ...
 *   await devnet.stop();
 *
 * - anvil mines every transaction immediately AND a block every `blockTimeSeconds`
 *   (`--block-time N --mixed-mining`).
 * - With `stateDir`, chain state lives in `<stateDir>/anvil-state.json` (`--state`, dumped on
 *   SIGTERM and every STATE_INTERVAL_SECONDS), so a restart keeps contracts and balances.
 * - Contracts are deployed through the CREATE2 deployer, so addresses are deterministic (and the same on every
 *   chain id): EntryPoint at the canonical 0x0000000071727De22E5E9d8BAf0edAc6f37da032, factory/paymaster
 *   depend only on (controller, paymaster signer). Deployment is idempotent.
 * - Anvil dev accounts (mnemonic "test ... junk"): #0 deploys and funds, #8 is Alto's executor,
 *   #9 Alto's utility key. Do not use #8/#9 elsewhere (nonce races with the bundler).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createPublicClient, createWalletClient, http, type Address, type Chain, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { CREATE2_DEPLOYER } from "../../shared/chain/solidity/artifacts";
import { ANVIL_KEYS, DEVNET_CHAIN_ID, deployContracts, fundAccounts } from "./deploy";
import { plantTokens, type PlantedToken } from "./tokens";
import { plantFeeds, type PlantedFeed } from "./feeds";
import {
  altoScript,
  anvilBinary,
  anvilLogFilter,
  loopbackPreload,
  rpc,
  spawnManaged,
  startWithFreePort,
  waitFor,
  type Managed,
} from "./processes";

export { ANVIL_KEYS, devnetAddresses } from "./deploy";
export { freePort } from "./processes";

export interface DevnetInfo {
  chainId: number;
  rpcUrl: string;
  bundlerUrl: string;
  entryPoint: Address;
  factory: Address;
  paymaster: Address;
  controller: Address;
  create2Deployer: Address;
  /** The well-known tokens planted at their public addresses (empty when planting is off). */
  tokens: PlantedToken[];
  /** The well-known price feeds planted at their public addresses (empty when planting is off). */
  feeds: PlantedFeed[];
}

export interface Devnet extends DevnetInfo {
  stop(): Promise<void>;
}

export interface StartDevnetOptions {
  /** anvil's chain id. Default 31337. */
  chainId?: number;
  /** Persist anvil state in `<stateDir>/anvil-state.json`; undefined = ephemeral chain. */
  stateDir?: string;
  /** Key of the account controller (its address goes into the factory). */
  controllerPrivateKey: Hex;
  /** Key of the VerifyingPaymaster's signer; defaults to the controller key. */
  paymasterSignerPrivateKey?: Hex;
  /** Interval mining period in seconds (transactions are also mined immediately). Default 2. */
  blockTimeSeconds?: number;
  /** Plant the chain id's well-known contracts: tokens (./tokens.ts) and price feeds (./feeds.ts). Default true. */
  tokens?: boolean;
  /** Receives anvil/alto/devnet log lines (prefixed). Quiet when omitted. */
  log?: (line: string) => void;
}

const STATE_INTERVAL_SECONDS = 5;

export async function startDevnet(opts: StartDevnetOptions): Promise<Devnet> {
  const started = Date.now();
  const chainId = opts.chainId ?? DEVNET_CHAIN_ID;
  // Each chain's lines are told apart by their prefix when several devnets share one log.
  const prefix = chainId === DEVNET_CHAIN_ID ? "" : `:${chainId}`;
  const log = opts.log && ((line: string) => opts.log!(line.replace(/^\[([a-z]+)\]/, `[$1${prefix}]`)));
  const note = (line: string) => log?.(`[devnet] ${line}`);
  const controller = privateKeyToAccount(opts.controllerPrivateKey).address;
  const paymasterSigner = privateKeyToAccount(opts.paymasterSignerPrivateKey ?? opts.controllerPrivateKey).address;

  const procs: Managed[] = [];
  const stopAll = async () => {
    // Bundler first (it talks to anvil), then anvil (which dumps its state on SIGTERM).
    for (const p of [...procs].reverse()) await p.stop();
  };
  try {
    const { proc: anvil, url: rpcUrl } = await startAnvil(chainId, opts, log);
    procs.push(anvil);
    note(`anvil ready at ${rpcUrl} (${Date.now() - started} ms)`);

    const chain = localChain(chainId, rpcUrl);
    const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 50 });
    const deployer = privateKeyToAccount(ANVIL_KEYS.deployer);
    const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: deployer });
    const [addresses, tokens, feeds] = await Promise.all([
      deployContracts(publicClient, wallet, { controller, paymasterSigner, note }),
      opts.tokens === false ? [] : plantTokens(publicClient, chainId),
      opts.tokens === false ? [] : plantFeeds(publicClient, chainId),
    ]);
    await fundAccounts(publicClient, wallet, controller, note);
    note(`contracts ready (${Date.now() - started} ms)`);

    const { proc: alto, url: bundlerUrl } = await startAlto(addresses.entryPoint, rpcUrl, log);
    procs.push(alto);
    note(`alto ready at ${bundlerUrl}; devnet ${chainId} started in ${Date.now() - started} ms`);

    let stopped: Promise<void> | undefined;
    return {
      chainId,
      rpcUrl,
      bundlerUrl,
      ...addresses,
      controller,
      create2Deployer: CREATE2_DEPLOYER,
      tokens,
      feeds,
      stop: () => (stopped ??= stopAll()),
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

/** A viem chain for a local anvil (the wallet client checks the node's chain id against it). */
function localChain(chainId: number, rpcUrl: string): Chain {
  return {
    id: chainId,
    name: `local ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  };
}

async function startAnvil(chainId: number, opts: StartDevnetOptions, log: ((line: string) => void) | undefined) {
  const anvilArgs = ["--host", "127.0.0.1", "--chain-id", String(chainId)];
  anvilArgs.push("--block-time", String(opts.blockTimeSeconds ?? 2), "--mixed-mining");
  // Prague: Osaka's EIP-7825 per-tx gas cap (2^24) trips bundler simulations with big limits.
  anvilArgs.push("--hardfork", "prague");
  if (opts.stateDir) {
    mkdirSync(opts.stateDir, { recursive: true });
    anvilArgs.push("--state", join(opts.stateDir, "anvil-state.json"));
    anvilArgs.push("--state-interval", String(STATE_INTERVAL_SECONDS));
  }
  return startWithFreePort("anvil", log, async (port) => {
    const proc = spawnManaged("anvil", anvilBinary(), [...anvilArgs, "--port", String(port)], log, anvilLogFilter());
    const url = `http://127.0.0.1:${port}`;
    await waitFor(proc, 30_000, async () => (await rpc(url, "eth_chainId", [])) !== undefined);
    return { proc, url };
  });
}

async function startAlto(entryPoint: Address, rpcUrl: string, log: ((line: string) => void) | undefined) {
  const args = altoArgs(entryPoint, rpcUrl, log !== undefined);
  return startWithFreePort("alto", log, async (port) => {
    const proc = spawnManaged(
      "alto",
      process.execPath,
      ["--import", loopbackPreload(), altoScript(), ...args, "--port", String(port)],
      log,
    );
    const url = `http://127.0.0.1:${port}`;
    await waitFor(proc, 60_000, async () => {
      const eps = (await rpc(url, "eth_supportedEntryPoints", [])) as string[] | undefined;
      return Array.isArray(eps) && eps.some((e) => e.toLowerCase() === entryPoint.toLowerCase());
    });
    return { proc, url };
  });
}

function altoArgs(entryPoint: Address, rpcUrl: string, verbose: boolean): string[] {
  return [
    "--entrypoints",
    entryPoint,
    "--rpc-url",
    rpcUrl,
    "--executor-private-keys",
    ANVIL_KEYS.bundlerExecutor,
    "--utility-private-key",
    ANVIL_KEYS.bundlerUtility,
    "--safe-mode",
    "false",
    "--deploy-simulations-contract",
    "true",
    // Poll the node often (alto's viem polling interval is block-time / 4): receipts arrive
    // right after the handleOps transaction is auto-mined.
    "--block-time",
    "200",
    "--min-bundle-interval",
    "50",
    "--max-bundle-interval",
    "200",
    // An operation under key 0 (the owner's) may be followed by the same key's next nonce: queue it.
    "--mempool-max-queued-ops",
    "10",
    // The service sends a wallet's operations side by side under nonce keys of their own (API.md §19): bundle
    // several operations of one sender together. Alto 0.0.20 applies this check only in safe mode (off above),
    // so it is stated for the day safe mode comes on; production bundlers differ (docs/decisions.md "Parallel user operations").
    "--enforce-unique-senders-per-bundle",
    "false",
    "--utility-wallet-monitor",
    "false",
    "--refilling-wallets",
    "false",
    "--log-level",
    verbose ? "info" : "warn",
    "--public-client-log-level",
    "warn",
    "--wallet-client-log-level",
    "warn",
    "--json",
    "true",
  ];
}
