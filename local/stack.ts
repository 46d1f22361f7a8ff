/**
 * The local runtime's components: DynamoDB Local, the KMS-compatible endpoint and one chain devnet per local
 * chain id (started side by side), all under one data directory. `npm start` and the test suite both start it; the result is the
 * environment (endpoints, chains, keys) that the shared config reads, exactly as in AWS.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startDynamoLocal } from "./dynamodb";
import { startKmsEndpoint } from "./kms-endpoint";
import { localKeys } from "./signing-keys";
import { stopLeftovers } from "./processes";
import { startDevnet, type Devnet, type DevnetInfo } from "./devnet/devnet";
import type { LocalChainSettings } from "./devnet/settings";

export interface LocalStack {
  /** Environment variables that point the shared config at these components. */
  env: Record<string, string>;
  /** The first chain's devnet (the default chain). */
  devnet?: DevnetInfo;
  /** Every chain's devnet, in LOCAL_CHAIN_IDS order. */
  devnets: DevnetInfo[];
  stop(): Promise<void>;
}

export async function startLocalStack(options: {
  dataDir: string;
  /** Keep DynamoDB and chain state on disk (npm start); tests use throwaway directories either way. */
  persist?: boolean;
  devnet?: boolean;
  /** Which chains, and whether well-known contracts (tokens, price feeds) are planted (./devnet/settings.ts). Default: 31337 with tokens. */
  chains?: LocalChainSettings;
  log?: (line: string) => void;
}): Promise<LocalStack> {
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  if (options.persist !== false) {
    const stopped = await stopLeftovers(dataDir);
    if (stopped) options.log?.(`stopped ${stopped} process(es) left over by an earlier run on ${dataDir}`);
  }
  const keys = localKeys(dataDir);
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  };
  try {
    const [dynamo, kms] = await Promise.all([
      startDynamoLocal(options.persist === false ? undefined : join(dataDir, "dynamodb")),
      startKmsEndpoint({ dataDir }),
    ]);
    stops.push(dynamo.stop, kms.stop);

    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      KMS_ENDPOINT: kms.url,
      JWT_SIGNING_KEY: keys.jwtSigningKeyPem,
      CONTROLLER_PRIVATE_KEY: keys.controllerPrivateKey,
      // Everything here listens on loopback (the devnet, test servers): workflow HTTP nodes must reach it.
      ALLOW_PRIVATE_NETWORK: process.env.ALLOW_PRIVATE_NETWORK ?? "true",
    };

    let devnets: DevnetInfo[] = [];
    if (options.devnet !== false) {
      const started = await startDevnets(options.chains ?? { chainIds: [31337], tokens: true }, {
        dataDir: options.persist === false ? undefined : dataDir,
        controllerPrivateKey: keys.controllerPrivateKey,
        log: options.log,
      });
      stops.push(...started.map((d) => d.stop));
      devnets = started.map(pickInfo);
      writeFileSync(join(dataDir, "devnet.json"), JSON.stringify({ ...devnets[0], chains: devnets }, null, 2) + "\n");
      env.CHAINS = JSON.stringify(configuredChains(devnets));
      if (!process.env.DEFAULT_CHAIN_ID) env.DEFAULT_CHAIN_ID = String(devnets[0]!.chainId);
    }
    return { env, devnet: devnets[0], devnets, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * One devnet per chain id, all started at once (each on ports of its own). When one fails, those that started are
 * stopped and the first failure is thrown.
 */
async function startDevnets(
  chains: LocalChainSettings,
  common: { dataDir?: string; controllerPrivateKey: `0x${string}`; log?: (line: string) => void },
): Promise<Devnet[]> {
  const results = await Promise.allSettled(
    chains.chainIds.map((chainId) =>
      startDevnet({
        chainId,
        // 31337 keeps the directory it has always had, so an existing data directory keeps its chain.
        stateDir: common.dataDir && join(common.dataDir, chainId === 31337 ? "chain" : `chain-${chainId}`),
        controllerPrivateKey: common.controllerPrivateKey,
        tokens: chains.tokens,
        log: common.log,
      }),
    ),
  );
  const started = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = results.find((r) => r.status === "rejected");
  if (failed) {
    await Promise.all(started.map((d) => d.stop()));
    throw failed.reason;
  }
  return started;
}

/** CHAINS as configured (API.md §5), each local chain replacing a configured one of its id. */
function configuredChains(devnets: DevnetInfo[]) {
  const configured = process.env.CHAINS ? (JSON.parse(process.env.CHAINS) as { chainId: number }[]) : [];
  return [
    ...configured.filter((c) => !devnets.some((d) => d.chainId === c.chainId)),
    ...devnets.map((d) => ({
      chainId: d.chainId,
      rpcUrl: d.rpcUrl,
      bundlerUrl: d.bundlerUrl,
      entryPoint: d.entryPoint,
      factory: d.factory,
      paymaster: d.paymaster,
      blockTimeSeconds: 2,
    })),
  ];
}

function pickInfo(d: DevnetInfo): DevnetInfo {
  const { chainId, rpcUrl, bundlerUrl, entryPoint, factory, paymaster, controller, create2Deployer, tokens, feeds } = d;
  return { chainId, rpcUrl, bundlerUrl, entryPoint, factory, paymaster, controller, create2Deployer, tokens, feeds };
}
