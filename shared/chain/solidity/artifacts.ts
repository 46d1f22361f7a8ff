/**
 * Contract artifacts and typed ABIs for the ERC-4337 (EntryPoint v0.7) stack.
 *
 * - `artifacts` (our compiled ControlledAccount / ControlledAccountFactory / ERC1967Proxy) comes
 *   from the committed artifacts.json (regenerate with `npx tsx shared/chain/solidity/compile.ts`).
 * - `controlledAccountAbi`, `controlledAccountFactoryAbi`, `verifyingPaymasterAbi` are `as const`
 *   subsets (typed for viem) of the full ABIs; tests/chain/contracts.test.ts checks they match.
 * - EntryPoint v0.7 and VerifyingPaymaster bytecode come from @account-abstraction/contracts
 *   (a devDependency) and are only loaded on demand (devnet), so runtime code that imports this
 *   module never needs that package. For the EntryPoint ABI use `entryPoint07Abi` from
 *   viem/account-abstraction.
 */
import { createRequire } from "node:module";
import { parseAbi, type Abi, type Address, type Hex } from "viem";
import artifactsJson from "./artifacts.json" with { type: "json" };

export interface ContractArtifact {
  abi: Abi;
  bytecode: Hex;
}

/** Our compiled contracts (full ABIs, creation bytecode). */
export const artifacts = artifactsJson as {
  ControlledAccount: ContractArtifact;
  ControlledAccountFactory: ContractArtifact;
  ERC1967Proxy: ContractArtifact;
  /** The local devnets' stand-ins for public tokens (local/devnet/tokens.ts). */
  LocalToken: ContractArtifact;
  LocalWrappedEther: ContractArtifact;
  /** The local devnets' stand-in for public Chainlink price feeds (local/devnet/feeds.ts). */
  LocalPriceFeed: ContractArtifact;
};

/** Arachnid's deterministic CREATE2 deployer (predeployed by anvil, present on most chains). */
export const CREATE2_DEPLOYER: Address = "0x4e59b44847b379578588920cA78FbF26c0B4956C";
/** Runtime code of CREATE2_DEPLOYER (input = salt(32) | initcode; returns the 20-byte address). */
export const CREATE2_DEPLOYER_RUNTIME_CODE: Hex =
  "0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3";
/** Salt with which the canonical EntryPoint v0.7 was deployed through CREATE2_DEPLOYER. */
export const ENTRYPOINT_V07_SALT: Hex = "0x90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3";

/** Typed subset of ControlledAccount's ABI. */
export const controlledAccountAbi = /* @__PURE__ */ parseAbi([
  "function owner() view returns (address)",
  "function controller() view returns (address)",
  "function entryPoint() view returns (address)",
  "function getNonce() view returns (uint256)",
  "function getDeposit() view returns (uint256)",
  "function addDeposit() payable",
  "function withdrawDepositTo(address withdrawAddress, uint256 amount)",
  "function initialize(address anOwner, address aController)",
  "function setController(address newController)",
  "function execute(address dest, uint256 value, bytes func)",
  "function executeBatch(address[] dest, uint256[] value, bytes[] func)",
  "function upgradeToAndCall(address newImplementation, bytes data) payable",
  "event ControllerChanged(address indexed previousController, address indexed newController)",
  "event SimpleAccountInitialized(address indexed entryPoint, address indexed owner)",
]);

/** Typed ABI of ControlledAccountFactory (complete). */
export const controlledAccountFactoryAbi = /* @__PURE__ */ parseAbi([
  "constructor(address _entryPoint, address _controller)",
  "function accountImplementation() view returns (address)",
  "function controller() view returns (address)",
  "function createAccount(address owner, uint256 salt) returns (address ret)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);

/** Typed subset of the v0.7 VerifyingPaymaster sample's ABI. */
export const verifyingPaymasterAbi = /* @__PURE__ */ parseAbi([
  "struct PackedUserOperation { address sender; uint256 nonce; bytes initCode; bytes callData; bytes32 accountGasLimits; uint256 preVerificationGas; bytes32 gasFees; bytes paymasterAndData; bytes signature; }",
  "constructor(address _entryPoint, address _verifyingSigner)",
  "function entryPoint() view returns (address)",
  "function verifyingSigner() view returns (address)",
  "function owner() view returns (address)",
  "function transferOwnership(address newOwner)",
  "function getHash(PackedUserOperation userOp, uint48 validUntil, uint48 validAfter) view returns (bytes32)",
  "function parsePaymasterAndData(bytes paymasterAndData) pure returns (uint48 validUntil, uint48 validAfter, bytes signature)",
  "function deposit() payable",
  "function getDeposit() view returns (uint256)",
  "function withdrawTo(address withdrawAddress, uint256 amount)",
  "function addStake(uint32 unstakeDelaySec) payable",
  "function unlockStake()",
  "function withdrawStake(address withdrawAddress)",
]);

type AccountAbstractionArtifactName = "EntryPoint" | "VerifyingPaymaster" | "SimpleAccount" | "SimpleAccountFactory";

const cache = new Map<string, ContractArtifact>();

/**
 * ABI + creation bytecode of an @account-abstraction/contracts@0.7.0 artifact, read from
 * node_modules on first use (devDependency: devnet/tests only).
 */
function loadAccountAbstractionArtifact(name: AccountAbstractionArtifactName): ContractArtifact {
  let artifact = cache.get(name);
  if (!artifact) {
    const require = createRequire(import.meta.url);
    const json = require(`@account-abstraction/contracts/artifacts/${name}.json`) as { abi: Abi; bytecode: Hex };
    artifact = { abi: json.abi, bytecode: json.bytecode };
    cache.set(name, artifact);
  }
  return artifact;
}

/** EntryPoint v0.7 (deploys at entryPoint07Address with ENTRYPOINT_V07_SALT). */
export const loadEntryPointArtifact = (): ContractArtifact => loadAccountAbstractionArtifact("EntryPoint");
/** VerifyingPaymaster v0.7 sample: constructor(IEntryPoint, address verifyingSigner). */
export const loadVerifyingPaymasterArtifact = (): ContractArtifact => loadAccountAbstractionArtifact("VerifyingPaymaster");
