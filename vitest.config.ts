import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // Every test file shares one DynamoDB Local, KMS endpoint and devnet started in globalSetup.
    globalSetup: ["tests/support/global-setup.ts"],
    // The default scheduler wired as every host wires it (tests/support/setup.ts).
    setupFiles: ["tests/support/setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
