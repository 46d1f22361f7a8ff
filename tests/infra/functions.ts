/** Each function the stage deploys (SST's component name) and its entry point. */
export const FUNCTIONS: Record<string, string> = {
  ApiCore: "functions/core.handler",
  ApiSecrets: "functions/secrets.handler",
  ApiWallets: "functions/wallets.handler",
  ApiWorkflows: "functions/workflows.handler",
  ApiExecutions: "functions/executions.handler",
  ExecutionStream: "functions/stream.handler",
  Runner: "functions/runner.handler",
  ChainWatcherHandler: "functions/watcher.handler",
  WithdrawalFollowUpHandler: "functions/sweeper.handler",
  ScheduleTarget: "functions/schedule.handler",
  Sandbox: "functions/sandbox.handler",
};

/** Every function but the sandbox one, whose role holds nothing but logs: no tracing, no metrics (infra/sandbox.ts). */
export const SERVICE_FUNCTIONS = Object.keys(FUNCTIONS).filter((id) => id !== "Sandbox");
