import { defineConfig } from "vitest/config";

/**
 * Two projects; `npm test` runs both, `npm run test:unit` (`vitest run --project unit`) the first alone.
 *
 * - `unit`: files named `*.unit.test.ts`. They need none of the local components (no `inject("stackEnv")`, no
 *   `useTestRuntime`, no service or DynamoDB; `useConfigRuntime` gives settings alone) and each runs in a few
 *   seconds, so nothing starts before them and the project runs in seconds. A loopback server or a KMS endpoint
 *   the file starts itself is fine.
 * - `stack`: every other `*.test.ts`, with DynamoDB Local, the KMS endpoint and the devnet started once in
 *   globalSetup. Pure files that take longer stay here: the sandbox's time and memory limits, property walks
 *   (cron gaps over years, 100 keys), build checks (bundling, compiling Solidity, the SST graph).
 *
 * - `chains`: files named `*.chains.test.ts`, on the same stack with two local chains (31337 and 11155111, API.md
 *   §21.4) started in their own globalSetup. Only tests that need a second chain go here: each chain costs an anvil
 *   and a bundler.
 *
 * A new test that calls a function with its inputs and is quick is `*.unit.test.ts`; one that needs a table, a
 * service or a chain, or takes more than a few seconds, is `*.test.ts`.
 */
const UNIT = "tests/**/*.unit.test.ts";
const CHAINS = "tests/**/*.chains.test.ts";
const STACK_SETUP_FILES = ["tests/support/log-level.ts", "tests/support/setup.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2,
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      // Tests log warnings and errors only (tests/support/log-level.ts applies it); LOG_LEVEL=debug shows all.
      LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
    },
    projects: [
      { extends: true, test: { name: "unit", include: [UNIT], setupFiles: ["tests/support/log-level.ts"] } },
      {
        extends: true,
        test: {
          name: "stack",
          include: ["tests/**/*.test.ts"],
          exclude: [UNIT, CHAINS],
          // Every test file shares one DynamoDB Local, KMS endpoint and devnet started in globalSetup.
          globalSetup: ["tests/support/global-setup.ts"],
          // The log level, and the default scheduler wired as every host wires it (tests/support/setup.ts).
          setupFiles: STACK_SETUP_FILES,
        },
      },
      {
        extends: true,
        test: {
          name: "chains",
          include: [CHAINS],
          globalSetup: ["tests/support/global-setup-chains.ts"],
          setupFiles: STACK_SETUP_FILES,
        },
      },
    ],
  },
});
