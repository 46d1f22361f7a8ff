// The sweeper (functions/sweeper.ts), every minute: follows pending withdrawals up with the bundler, ends
// executions pending past execution_timeout_ms, stores expired workflows completed (removing their schedules) and
// hands the runs of claims a crash interrupted to the runner through the bus.
import { table } from "./table";
import { keyEnvironment } from "./kms";
import { chains } from "./secrets";
import { bus } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";

export const sweeper = new sst.aws.Cron("WithdrawalFollowUp", {
  schedule: "rate(1 minute)",
  function: {
    handler: "functions/sweeper.handler",
    runtime: "nodejs22.x",
    architecture: "arm64",
    memory: "512 MB",
    timeout: "29 seconds",
    link: [table, chains, bus],
    environment: { ...keyEnvironment, ...schedulerEnvironment },
    // No KMS client in its bundle (tests/bundles.test.ts): no key permission.
    permissions: schedulerPermissions.stop,
  },
});
