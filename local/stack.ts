/**
 * The local runtime's components: DynamoDB Local, the KMS-compatible endpoint and the chain devnet,
 * all under one data directory. `npm start` and the test suite both start it; the result is the
 * environment (endpoints, chains, keys) that the shared config reads, exactly as in AWS.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startDynamoLocal } from "./dynamodb";
import { startKmsEndpoint } from "./kms-endpoint";
import { localKeys } from "./signing-keys";
import { stopLeftovers } from "./processes";
import { startDevnet, type DevnetInfo } from "./devnet/devnet";

export interface LocalStack {
  /** Environment variables that point the shared config at these components. */
  env: Record<string, string>;
  devnet?: DevnetInfo;
  stop(): Promise<void>;
}

export async function startLocalStack(options: {
  dataDir: string;
  /** Keep DynamoDB and chain state on disk (npm start); tests use throwaway directories either way. */
  persist?: boolean;
  devnet?: boolean;
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

    let devnet: DevnetInfo | undefined;
    if (options.devnet !== false) {
      const started = await startDevnet({
        stateDir: options.persist === false ? undefined : join(dataDir, "chain"),
        controllerPrivateKey: keys.controllerPrivateKey,
        log: options.log,
      });
      stops.push(started.stop);
      devnet = pickInfo(started);
      writeFileSync(join(dataDir, "devnet.json"), JSON.stringify(devnet, null, 2) + "\n");
      const configured = process.env.CHAINS ? (JSON.parse(process.env.CHAINS) as { chainId: number }[]) : [];
      const chains = [
        ...configured.filter((c) => c.chainId !== devnet!.chainId),
        {
          chainId: devnet.chainId,
          rpcUrl: devnet.rpcUrl,
          bundlerUrl: devnet.bundlerUrl,
          entryPoint: devnet.entryPoint,
          factory: devnet.factory,
          paymaster: devnet.paymaster,
          blockTimeSeconds: 2,
        },
      ];
      env.CHAINS = JSON.stringify(chains);
      if (!process.env.DEFAULT_CHAIN_ID) env.DEFAULT_CHAIN_ID = String(devnet.chainId);
    }
    return { env, devnet, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function pickInfo(d: DevnetInfo): DevnetInfo {
  const { chainId, rpcUrl, bundlerUrl, entryPoint, factory, paymaster, controller, create2Deployer } = d;
  return { chainId, rpcUrl, bundlerUrl, entryPoint, factory, paymaster, controller, create2Deployer };
}
