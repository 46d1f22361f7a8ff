/**
 * Starts the real local components once for the whole suite (DynamoDB Local, the KMS endpoint, the devnet)
 * in a throwaway data directory, and hands their environment to every test file through `provide`.
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

export default async function setup(project: TestProject) {
  const dataDir = mkdtempSync(join(tmpdir(), "wa-test-"));
  const stack = await startLocalStack({ dataDir, persist: true, devnet: process.env.TEST_DEVNET !== "0" });
  project.provide("stackEnv", stack.env);
  return async () => {
    await stack.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
