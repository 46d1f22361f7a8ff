/**
 * Compiles ControlledAccount + ControlledAccountFactory (and the devnet's LocalToken and LocalPriceFeed) with
 * solc-js 0.8.28 and writes shared/chain/solidity/artifacts.json (committed, so runtime and CI need no compiler).
 *
 *   npx tsx shared/chain/solidity/compile.ts        (also: npm run contracts:build)
 *
 * Output is deterministic: source unit names are package-relative (no absolute paths end up
 * in the metadata hash), keys are in a fixed order and there is no timestamp.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));

export const ARTIFACTS_PATH = join(here, "artifacts.json");

/** Contracts written to artifacts.json, in this order: [output name, source unit, contract]. */
const OUTPUTS = [
  ["ControlledAccount", "ControlledAccount.sol", "ControlledAccount"],
  ["ControlledAccountFactory", "ControlledAccountFactory.sol", "ControlledAccountFactory"],
  ["ERC1967Proxy", "@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol", "ERC1967Proxy"],
  ["LocalToken", "LocalToken.sol", "LocalToken"],
  ["LocalWrappedEther", "LocalToken.sol", "LocalWrappedEther"],
  ["LocalPriceFeed", "LocalPriceFeed.sol", "LocalPriceFeed"],
] as const;

export type ArtifactName = (typeof OUTPUTS)[number][0];
export interface CompiledArtifact {
  abi: unknown[];
  bytecode: `0x${string}`;
}
export type CompiledArtifacts = Record<ArtifactName, CompiledArtifact>;

export const SOLC_VERSION = "0.8.28";

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts?: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>>;
}

/** Resolve an import ("@scope/pkg/..." from node_modules, anything else from this folder). */
function findImport(path: string): { contents: string } | { error: string } {
  try {
    const file = path.startsWith("@") ? require.resolve(path) : join(here, path);
    return { contents: readFileSync(file, "utf8") };
  } catch (e) {
    return { error: `cannot resolve ${path}: ${(e as Error).message}` };
  }
}

/** Compile the contracts and return the artifacts (does not write anything). */
export async function compile(): Promise<CompiledArtifacts> {
  // solc's wrapper is CommonJS; loading soljson takes a few seconds.
  const solc = require("solc") as {
    version(): string;
    compile(input: string, callbacks: { import: typeof findImport }): string;
  };
  if (!solc.version().startsWith(SOLC_VERSION)) {
    throw new Error(`expected solc ${SOLC_VERSION}, found ${solc.version()}`);
  }
  const sources: Record<string, { content: string }> = {};
  for (const name of ["ControlledAccount.sol", "ControlledAccountFactory.sol", "LocalToken.sol", "LocalPriceFeed.sol"]) {
    sources[name] = { content: readFileSync(join(here, name), "utf8") };
  }
  const input = {
    language: "Solidity",
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
      viaIR: false,
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImport })) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join("\n")}`);
  }
  const result = {} as CompiledArtifacts;
  for (const [outName, source, contract] of OUTPUTS) {
    const c = output.contracts?.[source]?.[contract];
    if (!c) throw new Error(`solc produced no ${source}:${contract}`);
    result[outName] = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  }
  return result;
}

/** The exact text written to artifacts.json. */
export function serializeArtifacts(artifacts: CompiledArtifacts): string {
  return `${JSON.stringify(artifacts, null, 2)}\n`;
}

async function main(): Promise<void> {
  const started = Date.now();
  const artifacts = await compile();
  writeFileSync(ARTIFACTS_PATH, serializeArtifacts(artifacts));
  const sizes = Object.entries(artifacts)
    .map(([name, a]) => `${name} ${(a.bytecode.length - 2) / 2} bytes`)
    .join(", ");
  console.log(`wrote ${ARTIFACTS_PATH} (${sizes}) in ${Date.now() - started} ms`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
