/** Child processes of the local runtime: free ports, readiness waits, and a clean shutdown. */
import { createServer } from "node:net";
import type { ChildProcess } from "node:child_process";

export { freePort } from "./devnet/devnet";

/** True when nothing listens on `port` (checked on all interfaces, as the HTTP server will bind). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, () => server.close(() => resolve(true)));
  });
}

export async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 60_000, child?: ChildProcess) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} before it was ready`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} was not ready after ${timeoutMs} ms`);
}

/** SIGTERM, then SIGKILL if the process has not exited after `graceMs`. */
export async function stopProcess(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

const children = new Set<ChildProcess>();

/** Registers a child to be killed if this process exits without stopping it. */
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

/**
 * Stops processes left over by an earlier run on the same data directory (a host killed with SIGKILL
 * leaves its children running): anything whose command line names the directory. A leftover anvil gets
 * SIGTERM first, so it dumps its state before the new one loads it.
 */
export async function stopLeftovers(dataDir: string): Promise<number> {
  const { readdirSync, readFileSync } = await import("node:fs");
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return 0; // not Linux: nothing to look at
  }
  const mine = new Set([process.pid, process.ppid]);
  const leftovers: number[] = [];
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || mine.has(pid)) continue;
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const onOurData = args.some((arg) => arg.startsWith(dataDir + "/") || arg === dataDir) && /anvil|java/.test(args[0] ?? "");
      // An orphaned bundler names no directory; it is ours when it runs from this checkout and lost its parent.
      const parent = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[1]);
      const orphanedBundler = parent === 1 && args.some((arg) => arg.startsWith(`${process.cwd()}/node_modules/@pimlico/alto/`));
      if (onOurData || orphanedBundler) leftovers.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (const pid of leftovers) process.kill(pid, "SIGTERM");
  const deadline = Date.now() + 5_000;
  while (leftovers.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const pid of leftovers.filter(alive)) process.kill(pid, "SIGKILL");
  return leftovers.length;
}
