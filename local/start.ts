/**
 * `npm start`: the whole service on one machine. DynamoDB Local, the KMS endpoint and a devnet per LOCAL_CHAIN_IDS start under
 * DATA_DIR, then one @hono/node-server serves every route group on PORT. Ctrl-C stops everything cleanly.
 */
import { buildConfig } from "../shared/config";
import { createRuntime } from "../shared/runtime";
import { ensureTable } from "../shared/store/table";
import { createServiceApp } from "../shared/service/app";
import { wireLocal } from "../shared/service/wire-local";
import { setLogLevel } from "../shared/log";
import { portIsFree } from "./processes";
import { serveApp } from "./http-server";
import { startLocalStack, type LocalStack } from "./stack";
import { localChainSettings } from "./devnet/settings";
import { MAINTENANCE_PASSES, runMaintenance, type MaintenancePass } from "../shared/execution/maintenance";
import { log } from "../shared/log";
import { sandboxPool } from "../shared/sandbox/pool";
import { setRuntime } from "../shared/current-runtime";
import { closeJournals } from "../shared/workflow/claim-journal";
import { startWatching } from "../shared/watch/loop";

async function main() {
  // The pinned AWS SDK runs on Node 20; its notice about later releases needing Node 22 is noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  const base = buildConfig(); // validates the environment before anything starts
  const chains = localChainSettings();
  setLogLevel(base.logLevel);
  if (!(await portIsFree(base.port))) {
    console.error(`Port ${base.port} is already in use. Stop whatever listens there or choose another with PORT=<port>.`);
    process.exit(1);
  }

  console.log(`Starting the local runtime in ${base.dataDir} ...`);
  const stack = await startLocalStack({ dataDir: base.dataDir, persist: true, chains });
  const config = buildConfig({ ...process.env, ...stack.env });
  const runtime = setRuntime(createRuntime({ config }));
  await ensureTable(runtime.db, config.tableName);
  // Asynchronous triggers reach the runner through an in-process bus (AWS: EventBridge → the runner function);
  // cron and fixedTime fires live in the table, read by the local scheduler once started below.
  const { scheduler } = wireLocal();
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

  console.log(
    [
      `Workflow automation service listening on http://localhost:${config.port}`,
      `  data:        ${config.dataDir}`,
      `  DynamoDB:    ${stack.env.DYNAMODB_ENDPOINT} (table ${config.tableName})`,
      `  KMS:         ${stack.env.KMS_ENDPOINT}`,
      ...describeChains(stack),
      ...(stack.devnet ? [`  (written to ${config.dataDir}/devnet.json)`] : []),
    ].join("\n"),
  );

  // The maintenance passes (shared/execution/maintenance.ts), which the AWS sweeper runs every minute: pending
  // withdrawals every 5 s (a withdrawal's status follows the bundler closely), the others every 30 s.
  const maintain = (passes: readonly MaintenancePass[]) =>
    void runMaintenance({ passes }).then(({ failures }) => {
      for (const { pass, error } of failures)
        log.warn("maintenance pass failed", { pass, error: error instanceof Error ? error.message : String(error) });
    });
  const followUp = setInterval(() => maintain(["withdrawals"]), 5_000);
  const sweeper = setInterval(() => maintain(MAINTENANCE_PASSES.filter((pass) => pass !== "withdrawals")), 30_000);
  // Cron and fixedTime triggers: due fires live in the table, so a restart picks up where the last run stopped.
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

/** The lines that name each local chain's endpoints, contracts and planted tokens and price feeds. */
function describeChains(stack: LocalStack): string[] {
  return stack.devnets.flatMap((d) => [
    `  chain:       ${d.chainId}`,
    `    RPC:         ${d.rpcUrl}`,
    `    bundler:     ${d.bundlerUrl}`,
    `    EntryPoint:  ${d.entryPoint}`,
    `    factory:     ${d.factory}`,
    `    paymaster:   ${d.paymaster}`,
    `    controller:  ${d.controller}`,
    ...(d.tokens.length ? [`    tokens:      ${d.tokens.map((t) => `${t.symbol} ${t.address}`).join(", ")}`] : []),
    ...(d.feeds.length ? [`    feeds:       ${d.feeds.map((f) => `${f.description} ${f.address}`).join(", ")}`] : []),
  ]);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
