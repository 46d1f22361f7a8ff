/**
 * What the engine cannot run without, for the baselines of functions that run workflows: viem's public and
 * bundler clients (contract reads and writes, user operations), croner (cron triggers) and the QuickJS sandbox
 * (customCode). Imported by the *-engine baselines; it is a part, not a baseline of its own.
 */
import { createPublicClient, decodeFunctionResult, encodeFunctionData, http, parseAbi } from "viem";
import { createBundlerClient } from "viem/account-abstraction";
import { Cron } from "croner";
import { newQuickJSWASMModuleFromVariant, newVariant } from "quickjs-emscripten-core";
import RELEASE_SYNC from "@jitl/quickjs-singlefile-mjs-release-sync";

const abi = parseAbi(["function balanceOf(address) view returns (uint256)"]);

/** Runs each kind of work once: a sandboxed expression, the next cron instant, a contract read and a bundler client. */
export async function runEngineParts(rpcUrl: string) {
  const quickjs = await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, {}));
  const vm = quickjs.newContext();
  const sum = vm.dump(vm.unwrapResult(vm.evalCode("1 + 2")));
  vm.dispose();
  const next = new Cron("*/5 * * * *").nextRun();
  const client = createPublicClient({ transport: http(rpcUrl) });
  const bundler = createBundlerClient({ client, transport: http(rpcUrl) });
  const data = encodeFunctionData({ abi, functionName: "balanceOf", args: ["0x0000000000000000000000000000000000000000"] });
  const result = await client.call({ data, to: "0x0000000000000000000000000000000000000000" });
  const balance = decodeFunctionResult({ abi, functionName: "balanceOf", data: result.data ?? "0x" });
  return { sum, next, balance, bundler: bundler.type };
}
