/**
 * `npm start`: the whole service on one machine. DynamoDB Local, the KMS endpoint and the devnet start under
 * DATA_DIR, then one @hono/node-server serves every route group on PORT. Ctrl-C stops everything cleanly.
 */
import { buildConfig } from "../shared/config";
import { createRuntime, setRuntime } from "../shared/runtime";
import { ensureTable } from "../shared/store/table";
import { createServiceApp } from "../shared/service/app";
import { setLogLevel } from "../shared/log";
import { portIsFree } from "./processes";
import { serveApp } from "./http-server";
import { startLocalStack } from "./stack";
import { followUpPending } from "../shared/wallet/withdraw";
import { sweep } from "../shared/execution/execution";
import { closeJournals, expireDue, recordOutcome } from "../shared/workflow/workflow";
import { log } from "../shared/log";
import { createInProcessBus, setBus } from "../shared/execution/bus";
import { withRunner } from "../shared/execution/runner";
import { recoverInterruptedClaims } from "../shared/execution/claim";
import { endDueWaits } from "../shared/execution/waits";
import { resumeLostRuns } from "../shared/execution/recovery";
import { createLocalScheduler } from "../shared/schedule/local";
import { setScheduler } from "../shared/workflow/scheduler";
import { startWatching } from "../shared/watch/watcher";
import { sandboxPool } from "../shared/kinds/sandbox/pool";

async function main() {
  // The pinned AWS SDK runs on Node 20; its notice about later releases needing Node 22 is noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  const base = buildConfig(); // validates the environment before anything starts
  setLogLevel(base.logLevel);
  if (!(await portIsFree(base.port))) {
    console.error(`Port ${base.port} is already in use. Stop whatever listens there or choose another with PORT=<port>.`);
    process.exit(1);
  }

  console.log(`Starting the local runtime in ${base.dataDir} ...`);
  const stack = await startLocalStack({ dataDir: base.dataDir, persist: true });
  const config = buildConfig({ ...process.env, ...stack.env });
  const runtime = setRuntime(createRuntime({ config }));
  await ensureTable(runtime.db, config.tableName);
  // Asynchronous triggers reach the runner through an in-process bus (AWS: EventBridge → the runner function).
  setBus(withRunner(createInProcessBus()));
  // The sandbox workers load while the rest starts, so the first script does not wait for them.
  const sandboxes = sandboxPool().ready();

  let server: Awaited<ReturnType<typeof serveApp>>;
  try {
    await sandboxes;
    server = await serveApp(createServiceApp(), { port: config.port });
  } catch (err) {
    console.error(`Could not listen on port ${config.port}: ${(err as Error).message}`);
    await stack.stop();
    process.exit(1);
  }

  const d = stack.devnet;
  console.log(
    [
      `Workflow automation service listening on http://localhost:${config.port}`,
      `  data:        ${config.dataDir}`,
      `  DynamoDB:    ${stack.env.DYNAMODB_ENDPOINT} (table ${config.tableName})`,
      `  KMS:         ${stack.env.KMS_ENDPOINT}`,
      ...(d
        ? [
            `  chain:       ${d.chainId}`,
            `  RPC:         ${d.rpcUrl}`,
            `  bundler:     ${d.bundlerUrl}`,
            `  EntryPoint:  ${d.entryPoint}`,
            `  factory:     ${d.factory}`,
            `  paymaster:   ${d.paymaster}`,
            `  controller:  ${d.controller}`,
            `  (written to ${config.dataDir}/devnet.json)`,
          ]
        : []),
    ].join("\n"),
  );

  // Background follow-up of pending withdrawals (the AWS deployment runs the same function on a schedule).
  const followUp = setInterval(() => {
    followUpPending().catch((err) => log.warn("withdrawal follow-up failed", { error: (err as Error).message }));
  }, 5_000);
  // Executions still pending after execution_timeout_ms end `error` (the AWS sweeper runs every minute).
  const sweeper = setInterval(() => {
    const now = Date.now();
    sweep(now)
      .then(async ({ timedOut }) => {
        for (const e of timedOut) await recordOutcome(e.workflowId, "error", now);
      })
      .catch((err) => log.warn("execution sweep failed", { error: (err as Error).message }));
    // Workflows past expiredAt: stored completed / EXPIRED, slot, schedules and watch entry freed (API.md §8.2).
    expireDue(now, 200).catch((err) => log.warn("workflow expiry pass failed", { error: (err as Error).message }));
    // Claims a crash interrupted: finished (or dropped) a minute on, their runs handed over (API.md §18.4).
    recoverInterruptedClaims(now).catch((err) => log.warn("claim recovery failed", { error: (err as Error).message }));
    // Waits of await nodes past their deadline end AWAIT_TIMEOUT; runs whose wait ended are resumed (API.md §17.1).
    endDueWaits(now).catch((err) => log.warn("await timeout pass failed", { error: (err as Error).message }));
    // Resumed runs whose driver died (a crash after a wait ended) go on from their last sealed state.
    resumeLostRuns(now).catch((err) => log.warn("lost-run recovery failed", { error: (err as Error).message }));
  }, 30_000);
  // Cron and fixedTime triggers: due fires live in the table, so a restart picks up where the last run stopped.
  const scheduler = setScheduler(createLocalScheduler());
  scheduler.start();
  // Block and event triggers: the chain watcher polls the devnet (and any configured chain) until shutdown.
  const watcher = startWatching();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${signal}: shutting down ...`);
    clearInterval(followUp);
    clearInterval(sweeper);
    await scheduler.stop();
    await watcher.stop();
    await server.close();
    // Claims have all answered: their journals are closed here rather than left to the sweeper of the next start.
    await closeJournals().catch((err) => log.warn("could not close the claim journals", { error: (err as Error).message }));
    await stack.stop();
    console.log("Stopped.");
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
