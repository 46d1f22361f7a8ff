/**
 * `npm start` with LOCAL_CHAIN_IDS (API.md §21.4): a bad value is refused before anything starts, with a message
 * naming the setting; two chains start side by side, both are listed, written to devnet.json and served (a token
 * signed for 11155111 registers its wallet there); LOCAL_TOKENS=0 plants nothing.
 */
import { afterAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { freePort } from "../../local/processes";
import { signInWithAccount } from "../../local/client";
import { exited, waitFor } from "../support/wait";

const dataDirs: string[] = [];
const children: ChildProcess[] = [];

function start(env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), "wa-chains-"));
  dataDirs.push(dataDir);
  const child = spawn(process.execPath, ["--import", "tsx", "local/start.ts"], {
    env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const code = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, dataDir, output: () => output, code };
}

afterAll(async () => {
  for (const child of children.filter((c) => !exited(c))) {
    child.kill("SIGINT");
    await waitFor("npm start to exit", () => exited(child), { timeoutMs: 20_000 }).catch(() => undefined);
  }
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

describe("npm start with LOCAL_CHAIN_IDS", () => {
  it("refuses a bad value naming the setting, before it starts anything", { timeout: 60_000 }, async () => {
    const run = start({ PORT: String(await freePort()), LOCAL_CHAIN_IDS: "31337,sepolia" });
    expect(await run.code).toBe(1);
    expect(run.output()).toContain('LOCAL_CHAIN_IDS: each chain id must be an integer from 1 to 4503599627370476 (got "31337,sepolia")');
    expect(run.output()).not.toContain("Starting the local runtime");
    expect(readdirSync(run.dataDir)).toEqual([]);
  });

  it("serves both chains of LOCAL_CHAIN_IDS=11155111,31337; LOCAL_TOKENS=0 plants nothing", { timeout: 240_000 }, async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const run = start({ PORT: String(port), LOCAL_CHAIN_IDS: "11155111,31337", LOCAL_TOKENS: "0" });
    await waitFor("npm start to listen", async () => run.output().includes("listening on"), { timeoutMs: 200_000 });
    expect(run.output()).toMatch(/chain:\s+11155111[\s\S]*chain:\s+31337/);
    expect(run.output()).not.toContain("tokens:");

    const written = JSON.parse(readFileSync(join(run.dataDir, "devnet.json"), "utf8"));
    expect(written.chains.map((c: { chainId: number }) => c.chainId)).toEqual([11155111, 31337]);
    expect(written.chainId).toBe(11155111); // the first chain is the default one and devnet.json's top level
    expect(written.chains.map((c: { tokens: unknown[] }) => c.tokens)).toEqual([[], []]);
    const sepolia = createPublicClient({ transport: http(written.chains[0].rpcUrl) });
    expect(await sepolia.getChainId()).toBe(11155111);
    expect(await sepolia.getCode({ address: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238" })).toBeUndefined();

    // The default chain is the first; a token signed for the other one registers its wallets there.
    const health = (await (await fetch(`${base}/health`)).json()) as { chainId: number };
    expect(health.chainId).toBe(11155111);
    const owner = privateKeyToAccount(generatePrivateKey());
    const token = await signInWithAccount(base, owner, undefined, 31337);
    const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
    const created = await fetch(`${base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt: "0" }) });
    expect(created.status).toBe(201);
    const { address } = (await created.json()) as { address: string };
    const listed = async (chainId: number) =>
      ((await (await fetch(`${base}/wallets?chainId=${chainId}`, { headers })).json()) as { data: { address: string }[] }).data.map(
        (w) => w.address,
      );
    expect([await listed(31337), await listed(11155111)]).toEqual([[address], []]);

    run.child.kill("SIGINT");
    expect(await run.code).toBe(0);
  });
});
