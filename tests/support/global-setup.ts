/**
 * Starts the real local components once for the whole suite (DynamoDB Local, the KMS endpoint, the devnet of chain
 * 31337, its tokens planted) in a throwaway data directory, and hands their environment to every test file through
 * `provide`. ./global-setup-chains.ts starts the same with a second chain.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startLocalStack } from "../../local/stack";

declare module "vitest" {
  export interface ProvidedContext {
    stackEnv: Record<string, string>;
  }
}

/** The stack with a devnet per chain id (the first is the default chain); its teardown. */
export async function setupStack(project: TestProject, chainIds: number[]) {
  const dataDir = mkdtempSync(join(tmpdir(), "wa-test-"));
  const stack = await startLocalStack({
    dataDir,
    persist: true,
    devnet: process.env.TEST_DEVNET !== "0",
    chains: { chainIds, tokens: true },
  });
  project.provide("stackEnv", stack.env);
  return async () => {
    await stack.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

export default (project: TestProject) => setupStack(project, [31337]);
