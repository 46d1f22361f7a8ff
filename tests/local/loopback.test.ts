/**
 * API.md §18.6: the local runtime's components (DynamoDB Local, the KMS endpoint, anvil, the Alto bundler)
 * listen on the loopback interface only. Read from the OS, not from the components' own word: every listening
 * TCP socket in /proc/net/tcp and /proc/net/tcp6 on a component's port, and every listening socket owned by a
 * component's process (found through the socket inodes in /proc/<pid>/fd), must be bound to 127.0.0.0/8 or ::1.
 * A socket on 0.0.0.0 or :: fails the test; the first test shows that this reader does see such a socket.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { existsSync, readFileSync, readdirSync, readlinkSync } from "node:fs";
import { createConnection, createServer, type Server } from "node:net";
import { endianness, networkInterfaces } from "node:os";

interface ListeningSocket {
  address: string;
  port: number;
  inode: number;
}

/** Every TCP socket in LISTEN state on this machine's network namespace, IPv4 and IPv6. */
function listeningSockets(): ListeningSocket[] {
  const sockets: ListeningSocket[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      if (fields.length < 10 || fields[3] !== "0A") continue; // 0A = TCP_LISTEN
      const [hexAddress, hexPort] = fields[1]!.split(":") as [string, string];
      sockets.push({ address: decodeAddress(hexAddress), port: parseInt(hexPort, 16), inode: Number(fields[9]) });
    }
  }
  return sockets;
}

/** /proc/net/tcp{,6} addresses: 32-bit words of network-order bytes, each printed as a host-order integer. */
function decodeAddress(hex: string): string {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8) {
    const wordBytes = [0, 2, 4, 6].map((i) => parseInt(hex.slice(word + i, word + i + 2), 16));
    bytes.push(...(endianness() === "LE" ? wordBytes.reverse() : wordBytes));
  }
  if (bytes.length === 4) return bytes.join(".");
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  if (groups.every((g) => g === 0)) return "::";
  if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return "::1";
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `::ffff:${bytes.slice(12).join(".")}`;
  return groups.map((g) => g.toString(16)).join(":");
}

/** 127.0.0.0/8, ::1, and IPv4-mapped 127.0.0.0/8. */
const isLoopback = (address: string) => /^127\./.test(address) || address === "::1" || /^::ffff:127\./.test(address);

/** The socket inodes a process holds open. */
function socketInodes(pid: number): Set<number> {
  const inodes = new Set<number>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(Number(match[1]));
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/** The processes (pid and command line) holding any of these socket inodes open. */
function owners(inodes: number[]): { pid: number; cmdline: string }[] {
  const found: { pid: number; cmdline: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const held = socketInodes(pid);
      if (inodes.some((inode) => held.has(inode))) {
        found.push({ pid, cmdline: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ") });
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

const portOf = (url: string) => Number(new URL(url).port);
const describeSockets = (sockets: ListeningSocket[]) => sockets.map((s) => `${s.address}:${s.port}`);

/** This machine's own non-loopback addresses (the ones another host could reach). */
function externalAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a && !a.internal && (a.family === "IPv4" || !a.address.startsWith("fe80:")))
    .map((a) => a!.address);
}

/** Resolves "connected" or the connect error's code (ECONNREFUSED when nothing listens there). */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port, timeout: 2_000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve("ETIMEDOUT");
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
  });
}

const env = inject("stackEnv");
const devnet = (JSON.parse(env.CHAINS ?? "[]") as { chainId: number; rpcUrl: string; bundlerUrl?: string }[]).find(
  (c) => c.chainId === 31337,
);

/** Each component: its endpoint, and how to recognise its own process (undefined: it runs inside the test host). */
const components: { name: string; url: string | undefined; process?: RegExp }[] = [
  { name: "DynamoDB Local", url: env.DYNAMODB_ENDPOINT, process: /\bjava\b.*DynamoDBLocal/ },
  { name: "KMS endpoint", url: env.KMS_ENDPOINT },
  { name: "anvil", url: devnet?.rpcUrl, process: /\banvil\b/ },
  { name: "Alto bundler", url: devnet?.bundlerUrl, process: /@pimlico\/alto\// },
];

describe.runIf(process.platform === "linux")("local components listen on loopback only (API.md §18.6)", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  const listenOn = async (host: string): Promise<number> => {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return (server.address() as { port: number }).port;
  };

  it("the socket reader tells a wildcard listener from a loopback one", async () => {
    const wildcard = await listenOn("0.0.0.0");
    const loopback = await listenOn("127.0.0.1");
    const sockets = listeningSockets();
    expect(sockets.filter((s) => s.port === wildcard).map((s) => s.address)).toEqual(["0.0.0.0"]);
    expect(sockets.filter((s) => s.port === loopback).map((s) => s.address)).toEqual(["127.0.0.1"]);
    expect(isLoopback("0.0.0.0")).toBe(false);
    expect(isLoopback("::")).toBe(false);
    // and finds the process that holds it
    const [wildcardSocket] = sockets.filter((s) => s.port === wildcard);
    expect(owners([wildcardSocket!.inode]).map((o) => o.pid)).toContain(process.pid);
  });

  it("the socket reader decodes IPv6 wildcard and loopback listeners", async (ctx) => {
    let wildcard: number;
    let loopback: number;
    try {
      wildcard = await listenOn("::");
      loopback = await listenOn("::1");
    } catch {
      ctx.skip(); // no IPv6 on this machine
      return;
    }
    const sockets = listeningSockets();
    expect(sockets.filter((s) => s.port === wildcard).map((s) => s.address)).toEqual(["::"]);
    expect(sockets.filter((s) => s.port === loopback).map((s) => s.address)).toEqual(["::1"]);
  });

  for (const component of components) {
    it.runIf(component.url !== undefined)(`${component.name} listens on 127.0.0.1 only`, async () => {
      const port = portOf(component.url!);
      const onPort = listeningSockets().filter((s) => s.port === port);
      expect(onPort.length, `nothing listens on ${component.name}'s port ${port}`).toBeGreaterThan(0);
      expect(describeSockets(onPort.filter((s) => !isLoopback(s.address))), `${component.name} on all interfaces`).toEqual([]);

      if (component.process) {
        // Its own process: every socket it listens on, whatever the port, is on loopback.
        const [owner, ...others] = owners(onPort.map((s) => s.inode));
        expect(others).toEqual([]);
        expect(owner?.cmdline).toMatch(component.process);
        const held = socketInodes(owner!.pid);
        const all = listeningSockets().filter((s) => held.has(s.inode));
        expect(all.map((s) => s.port)).toContain(port);
        expect(
          describeSockets(all.filter((s) => !isLoopback(s.address))),
          `${component.name} (pid ${owner!.pid}) listens beyond loopback`,
        ).toEqual([]);
      }

      // From outside loopback, nothing answers on that port.
      for (const address of externalAddresses()) {
        expect(await tryConnect(address, port), `${component.name} reachable on ${address}:${port}`).not.toBe("connected");
      }
      // ... and on loopback it does.
      expect(await tryConnect(new URL(component.url!).hostname, port)).toBe("connected");
    });
  }
});
