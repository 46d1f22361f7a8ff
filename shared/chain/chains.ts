/**
 * Configured chains (API.md §5): which chain a request means, and cached viem clients for its RPC and bundler.
 */
import {
  AbiDecodingDataSizeTooSmallError,
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  createPublicClient,
  http,
  isAddressEqual,
  type Address,
  type PublicClient,
} from "viem";
import type { BundlerClient } from "viem/account-abstraction";
import { ApiError } from "../errors";
import { currentCaller } from "../context";
import type { ChainSettings } from "../config";
import { kmsDigestSigner } from "./kms-signer";
import { useKms } from "../envelope/kms";
import { useConfig } from "../current-runtime";
import { createBundler } from "./userop-bundler";
import { localDigestSigner, type DigestSigner } from "./userop-signer";

export const unsupportedChain = (chainId: number) =>
  new ApiError(400, "UNSUPPORTED_CHAIN", `Chain ${chainId} is not supported by this service.`);

export function chainSettings(chainId: number): ChainSettings {
  const chain = useConfig().chains.find((c) => c.chainId === chainId);
  if (!chain) throw unsupportedChain(chainId);
  return chain;
}

/** Wallet-route chain resolution: explicit non-zero chainId → the JWT `aud` chain if configured → default. */
export function resolveCallerChain(explicit?: number): ChainSettings {
  if (explicit) return chainSettings(explicit);
  const { chains, defaultChainId } = useConfig();
  const audience = currentCaller()?.audienceChainId;
  return chains.find((c) => c.chainId === audience) ?? chainSettings(defaultChainId);
}

/**
 * The chain's known factories: the configured `factory` and `knownFactories`, ControlledAccountFactory deployments
 * with the service's controller. Only for them is an address derived offline and init code built (API.md §11.3).
 */
export function isKnownFactory(chain: ChainSettings, factory: Address): boolean {
  return [chain.factory, ...chain.knownFactories].some((known) => known !== undefined && isAddressEqual(known as Address, factory));
}

/**
 * True when a contract call failed because of the contract (it reverted, answered nothing or too little), not
 * because of the RPC: the contract is not what the caller said it is.
 */
export function contractRefused(err: unknown): boolean {
  return (
    err instanceof BaseError &&
    Boolean(
      err.walk(
        (e) =>
          e instanceof ContractFunctionRevertedError ||
          e instanceof ContractFunctionZeroDataError ||
          e instanceof AbiDecodingDataSizeTooSmallError,
      ),
    )
  );
}

const publicClients = new Map<string, PublicClient>();
const bundlerClients = new Map<string, BundlerClient>();

export function publicClient(chain: ChainSettings): PublicClient {
  let client = publicClients.get(chain.rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(chain.rpcUrl, { timeout: 10_000, retryCount: 1 }) }) as PublicClient;
    publicClients.set(chain.rpcUrl, client);
  }
  return client;
}

export function bundlerClient(chain: ChainSettings): BundlerClient {
  if (!chain.bundlerUrl) throw unsupportedChain(chain.chainId);
  let client = bundlerClients.get(chain.bundlerUrl);
  if (!client) {
    client = createBundler(chain.bundlerUrl);
    bundlerClients.set(chain.bundlerUrl, client);
  }
  return client;
}

let controller: Promise<DigestSigner> | undefined;
let controllerSource: string | undefined;

/** The service's controller key: a local private key (devnet, development) or a KMS secp256k1 key (AWS). */
export function controllerSigner(): Promise<DigestSigner> {
  const config = useConfig();
  const source = config.controllerPrivateKey ?? config.controllerKmsKeyId;
  if (!source) throw new Error("Neither CONTROLLER_PRIVATE_KEY nor CONTROLLER_KMS_KEY_ID is configured");
  if (!controller || controllerSource !== source) {
    controllerSource = source;
    controller = config.controllerPrivateKey
      ? Promise.resolve(localDigestSigner(config.controllerPrivateKey))
      : kmsDigestSigner(useKms(), config.controllerKmsKeyId!);
  }
  return controller;
}
