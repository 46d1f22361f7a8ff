/**
 * The committed artifacts.json is exactly what compile.ts produces from the .sol sources, and the
 * typed ABI subsets in shared/chain/solidity/artifacts.ts agree with the full ABIs.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Abi, AbiParameter } from "viem";
import { ARTIFACTS_PATH, compile, serializeArtifacts } from "../../shared/chain/solidity/compile";
import {
  artifacts,
  controlledAccountAbi,
  controlledAccountFactoryAbi,
  loadEntryPointArtifact,
  loadVerifyingPaymasterArtifact,
  verifyingPaymasterAbi,
} from "../../shared/chain/solidity/artifacts";

function canonicalType(p: AbiParameter): string {
  if (p.type.startsWith("tuple")) {
    const components = (p as { components: readonly AbiParameter[] }).components;
    return `(${components.map(canonicalType).join(",")})${p.type.slice("tuple".length)}`;
  }
  return p.type;
}

/** type name(inputs)(outputs) mutability[indexed flags] — ignores parameter names. */
function signature(item: Abi[number]): string {
  const inputs = "inputs" in item ? item.inputs.map((i) => canonicalType(i) + ("indexed" in i && i.indexed ? " indexed" : "")) : [];
  const outputs = "outputs" in item ? item.outputs.map(canonicalType) : [];
  const name = "name" in item ? item.name : "";
  const mutability = "stateMutability" in item ? item.stateMutability : "";
  return `${item.type} ${name}(${inputs.join(",")})(${outputs.join(",")}) ${mutability}`;
}

function expectSubset(subset: Abi, full: Abi) {
  const all = new Set(full.map(signature));
  for (const item of subset) expect(all, signature(item)).toContain(signature(item));
}

describe("contracts", () => {
  it("artifacts.json is up to date with the Solidity sources (npx tsx shared/chain/solidity/compile.ts)", async () => {
    const compiled = await compile();
    expect(serializeArtifacts(compiled)).toBe(readFileSync(ARTIFACTS_PATH, "utf8"));
    expect(Object.keys(compiled)).toEqual([
      "ControlledAccount",
      "ControlledAccountFactory",
      "ERC1967Proxy",
      "LocalToken",
      "LocalWrappedEther",
      "LocalPriceFeed",
    ]);
  }, 120_000);

  it("the typed ABIs match the compiled ones", () => {
    expectSubset(controlledAccountAbi, artifacts.ControlledAccount.abi);
    expectSubset(controlledAccountFactoryAbi, artifacts.ControlledAccountFactory.abi);
    // the factory ABI is complete
    expect(controlledAccountFactoryAbi.length).toBe(artifacts.ControlledAccountFactory.abi.length);
    expectSubset(verifyingPaymasterAbi, loadVerifyingPaymasterArtifact().abi);
  });

  it("exposes the @account-abstraction v0.7 EntryPoint and VerifyingPaymaster artifacts", () => {
    for (const a of [loadEntryPointArtifact(), loadVerifyingPaymasterArtifact()]) {
      expect(a.bytecode).toMatch(/^0x[0-9a-f]{1000,}$/);
      expect(a.abi.length).toBeGreaterThan(5);
    }
  });
});
