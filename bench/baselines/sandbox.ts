/**
 * Baseline for functions/sandbox.ts, the sandbox function: QuickJS (the single-file release build) and a plain
 * handler that evaluates one expression in a fresh instance, with nothing else.
 */
import { newQuickJSWASMModuleFromVariant } from "quickjs-emscripten-core";
import RELEASE_SYNC from "@jitl/quickjs-singlefile-mjs-release-sync";

const module = newQuickJSWASMModuleFromVariant(RELEASE_SYNC);

export const handler = async (event: { source: string }) => {
  const vm = (await module).newContext();
  const result = vm.unwrapResult(vm.evalCode(event.source));
  const value: unknown = vm.dump(result);
  result.dispose();
  vm.dispose();
  return value;
};
