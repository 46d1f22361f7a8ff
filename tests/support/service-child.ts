/**
 * Another service process for a test file (./service-process.ts) on the suite's components and the file's table:
 * `env` adds to the suite's environment (CHAINS, limits). `kill()` ends it with SIGKILL, as a crash would.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { stackEnv } from "./runtime";

export interface ServiceChild {
  url: string;
  child: ChildProcess;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  kill(): Promise<void>;
}

export async function startServiceChild(tableName: string, env: Record<string, string> = {}): Promise<ServiceChild> {
  const child = spawn(process.execPath, ["--import", "tsx", "tests/support/service-process.ts"], {
    env: { ...process.env, ...stackEnv(), TABLE_NAME: tableName, LOG_LEVEL: "error", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  child.stderr!.on("data", (d) => (output += String(d)));
  const port = await new Promise<number>((resolve, reject) => {
    let line = "";
    child.stdout!.on("data", (d) => {
      line += String(d);
      const match = /\{"port":(\d+)\}/.exec(line);
      if (match) resolve(Number(match[1]));
    });
    void exited.then(() => reject(new Error(`the service process exited:\n${output}`)));
    setTimeout(() => reject(new Error(`the service process did not start:\n${output}`)), 60_000);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
