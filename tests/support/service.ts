/**
 * The whole service for a test file, as `npm start` runs it: this file's runtime (useTestRuntime, rate limits out
 * of the way unless `env` sets them), an in-process bus, and the service app on a real HTTP server. With
 * `runner` (the default) the bus hands every execution published to the runner; without, executions stay pending
 * until a test delivers them. `close()` waits for the runs the bus has started, then closes the server.
 */
import { useTestRuntime } from "./runtime";
import { startTestServer, type TestServer } from "./server";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";
import type { Runtime } from "../../shared/current-runtime";

export interface TestService {
  runtime: Runtime;
  bus: InProcessBus;
  server: TestServer;
  /** The server's base URL. */
  url: string;
  close(): Promise<void>;
}

export async function startService(env: Record<string, string> = {}, { runner = true } = {}): Promise<TestService> {
  const runtime = await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000", ...env });
  const bus = setBus(runner ? withRunner(createInProcessBus()) : createInProcessBus());
  const server = await startTestServer(createServiceApp());
  return {
    runtime,
    bus,
    server,
    url: server.url,
    close: async () => {
      await bus.idle();
      await server.close();
    },
  };
}
