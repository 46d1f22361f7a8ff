/**
 * Another service process for tests: the whole app (as `npm start` serves it) on its own loopback port, on the
 * table and local components its environment names (DYNAMODB_ENDPOINT, TABLE_NAME, JWT_SIGNING_KEY, …), without
 * starting any of them. Prints `{"port":N}` once listening. STREAM_LEASE_MS, STREAM_HEARTBEAT_MS and
 * STREAM_IDLE_MS set this process's stream lease timing (shared/execution/stream-slots.ts).
 *
 *   node --import tsx tests/support/service-process.ts
 */
import { buildConfig } from "../../shared/config";
import { setLogLevel } from "../../shared/log";
import { createRuntime } from "../../shared/runtime";
import { createServiceApp } from "../../shared/service/app";
import { configureStreamLeases } from "../../shared/execution/stream-slots";
import { serveApp } from "../../local/http-server";
import { wireLocal } from "../../shared/service/wire-local";
import { setRuntime } from "../../shared/current-runtime";

const ms = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);

const leaseMs = ms("STREAM_LEASE_MS");
const heartbeatMs = ms("STREAM_HEARTBEAT_MS");
const idleMs = ms("STREAM_IDLE_MS");
configureStreamLeases({
  ...(leaseMs !== undefined && { leaseMs }),
  ...(heartbeatMs !== undefined && { heartbeatMs }),
  ...(idleMs !== undefined && { idleMs }),
});
const { config } = setRuntime(createRuntime({ config: buildConfig() }));
setLogLevel(config.logLevel);
wireLocal();
const server = await serveApp(createServiceApp(), { port: 0, hostname: "127.0.0.1" });
process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);

const stop = () => void server.close().then(() => process.exit(0));
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
