/**
 * The devnet's processes (devnet.ts starts them): the anvil and Alto executables, spawning with the children dying
 * with the parent, free loopback ports, readiness polling, a bare JSON-RPC call.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

const binDir = join(dirname(fileURLToPath(import.meta.url)), "../../node_modules/.bin");
/** Alto's CLI script, run with this Node (one process, handles SIGTERM itself). */
export const altoScript = (): string => realpathSync(join(binDir, "alto"));
/**
 * Alto hard-codes `listen({ host: "0.0.0.0" })`; this preload (`node --import`) makes every server of its
 * process listen on 127.0.0.1 instead.
 */
export const loopbackPreload = (): string =>
  pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "../loopback/listen-loopback.mjs")).href;

/**
 * The real anvil executable. node_modules/.bin/anvil is a Node wrapper that, on SIGTERM, forwards
 * the signal and exits at once without waiting for anvil (so "stopped" would not mean "state
 * dumped"), and on SIGKILL orphans anvil. Run the platform binary directly; fall back to the
 * wrapper when the platform package is not installed.
 */
export function anvilBinary(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  try {
    const path = createRequire(import.meta.url).resolve(`@foundry-rs/anvil-${process.platform}-${arch}/bin/${exe}`);
    if (existsSync(path)) return path;
  } catch {
    // fall through
  }
  return join(binDir, "anvil");
}
// ---------------------------------------------------------------------------------------------
// Processes

export interface Managed {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
  isExited(): boolean;
  recent(): string;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHooksInstalled = false;

/** Children die with the parent: on 'exit' (sync SIGKILL) and on fatal signals. */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", () => {
    for (const c of live) c.kill("SIGKILL");
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = () => {
      // A host with its own handler (npm start) shuts down gracefully and stops the devnet itself,
      // which lets anvil dump its state; only an unhandled signal kills the children at once.
      if (process.listenerCount(sig) > 1) return;
      for (const c of live) c.kill("SIGKILL");
      process.removeListener(sig, handler);
      process.kill(process.pid, sig);
    };
    process.on(sig, handler);
  }
}

/** Drops anvil's startup banner (accounts, keys) and its one-line-per-RPC-call method names. */
export function anvilLogFilter(): (line: string) => boolean {
  let bannerDone = false;
  return (line) => {
    if (!bannerDone) {
      bannerDone = line.startsWith("Listening on");
      return bannerDone;
    }
    return !/^\s*[a-z0-9]+_[A-Za-z0-9_]+\s*$/.test(line);
  };
}

export function spawnManaged(
  name: string,
  bin: string,
  args: string[],
  log?: (l: string) => void,
  filter: (line: string) => boolean = () => true,
): Managed {
  installExitHooks();
  // Own process group: a Ctrl-C in the terminal reaches the host only, which then stops us in order.
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: process.env, detached: true });
  live.add(child);
  const tail: string[] = [];
  let done = false;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true;
      live.delete(child);
      log?.(`[${name}] exited (${signal ?? code})`);
      resolve();
    });
    child.once("error", (err) => {
      tail.push(String(err));
      done = true;
      live.delete(child);
      resolve();
    });
  });
  // Always drain stdout/stderr (a full pipe would block the child); keep a tail for errors.
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      tail.push(line);
      if (tail.length > 40) tail.shift();
      if (log && filter(line)) log(`[${name}] ${line}`);
    });
  }
  return {
    name,
    child,
    exited,
    isExited: () => done,
    recent: () => tail.join("\n"),
    async stop() {
      if (done) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A free TCP port on the loopback interface (the local runtime uses it too). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Start a process on a free port, retrying with a new port if it dies (e.g. port taken meanwhile). */
export async function startWithFreePort<T extends { proc: Managed }>(
  name: string,
  log: ((l: string) => void) | undefined,
  start: (port: number) => Promise<T>,
): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await start(port);
    } catch (e) {
      lastError = e;
      log?.(`[devnet] ${name} failed to start on port ${port}: ${(e as Error).message}`);
    }
  }
  throw lastError;
}

/** Poll `ready` until true; fail fast (with the process' last output) if the process exits. */
export async function waitFor(proc: Managed, timeoutMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.isExited()) throw new Error(`${proc.name} exited during startup:\n${proc.recent()}`);
    if (await ready().catch(() => false)) {
      // Make sure it was our process that answered (not another one that grabbed the port).
      await new Promise((r) => setTimeout(r, 50));
      if (proc.isExited()) throw new Error(`${proc.name} exited during startup:\n${proc.recent()}`);
      return;
    }
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`${proc.name} not ready after ${timeoutMs} ms:\n${proc.recent()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(2_000),
  });
  if (!res.ok) return undefined;
  const body = (await res.json()) as { result?: unknown };
  return body.result;
}
