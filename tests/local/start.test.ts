/**
 * `npm start` as the acceptance suite uses it: a real process on PORT with state under DATA_DIR. Everything a
 * client did (a secret, a wallet, a withdrawal on chain) is still there after a clean restart, and a second
 * start on a taken port is refused with a clear message.
 */
import { afterAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, createTestClient, http, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { freePort } from "../../local/processes";
import { signInWithAccount } from "../../local/client";
import { exited, waitFor } from "../support/wait";

const dataDir = mkdtempSync(join(tmpdir(), "wa-start-"));
let port = 0;
let current: ChildProcess | undefined;

function start(): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", "local/start.ts"], {
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function untilListening(output: () => string) {
  for (let i = 0; i < 1200; i++) {
    if (output().includes("listening on")) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`npm start did not come up:\n${output()}`);
}

async function stop(child: ChildProcess, exited: Promise<number | null>) {
  child.kill("SIGINT");
  return exited;
}

afterAll(async () => {
  if (current && !exited(current)) {
    current.kill("SIGINT");
    // npm start stops its components before it exits; only then is its data directory removed.
    await waitFor("npm start to exit", () => exited(current!), { timeoutMs: 10_000 }).catch(() => undefined);
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe("npm start", () => {
  it("keeps secrets, wallets, chain state and waiting runs across a restart, and refuses a taken port", { timeout: 360_000 }, async () => {
    port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const owner = privateKeyToAccount(generatePrivateKey());

    const first = start();
    current = first.child;
    await untilListening(first.output);
    expect(first.output()).toMatch(/EntryPoint:\s+0x[0-9a-fA-F]{40}/);

    // a second instance on the same port is refused
    const second = start();
    expect(await second.exited).toBe(1);
    expect(second.output()).toContain(`Port ${port} is already in use`);

    const devnet = JSON.parse(readFileSync(join(dataDir, "devnet.json"), "utf8")) as { rpcUrl: string; chainId: number };
    let token = await signInWithAccount(base, owner);
    const headers = () => ({ Authorization: `Bearer ${token}`, "Content-Type": "application/json" });
    expect(
      (await fetch(`${base}/secrets/KEEP_ME`, { method: "PUT", headers: headers(), body: JSON.stringify({ value: "kept" }) })).status,
    ).toBe(201);
    const wallet = (await (
      await fetch(`${base}/wallets`, { method: "POST", headers: headers(), body: JSON.stringify({ salt: "3" }) })
    ).json()) as { address: `0x${string}` };
    await createTestClient({ mode: "anvil", transport: http(devnet.rpcUrl) }).setBalance({
      address: wallet.address,
      value: parseEther("1"),
    });
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const withdrawal = (await (
      await fetch(`${base}/wallets/${wallet.address}:withdraw`, {
        method: "POST",
        headers: headers(),
        body: JSON.stringify({ recipientAddress: recipient, amount: "9999", token: "ETH" }),
      })
    ).json()) as { status: string; id: string };
    expect(withdrawal.status).toBe("confirmed");

    // Two runs wait at await nodes (API.md §17.1): one for a signal after the restart, one for its deadline.
    const waitingRun = async (timeoutSeconds: number) => {
      const created = (await (
        await fetch(`${base}/workflows`, {
          method: "POST",
          headers: headers(),
          body: JSON.stringify({
            smartWalletAddress: wallet.address,
            trigger: { id: "t", name: "start", type: "manual", config: { data: { n: 7 } } },
            nodes: [
              { id: "gate", name: "gate", type: "await", config: { channel: "api", timeoutSeconds } },
              { id: "after", name: "after", type: "customCode", config: { source: "return start.data.n + gate.data.payload" } },
            ],
          }),
        })
      ).json()) as { id: string };
      const run = (await (
        await fetch(`${base}/workflows/${created.id}:trigger`, {
          method: "POST",
          headers: headers(),
          body: JSON.stringify({ triggerType: "manual", isBlocking: true }),
        })
      ).json()) as { executionId: string; status: string };
      expect(run.status).toBe("waiting");
      return { workflowId: created.id, executionId: run.executionId };
    };
    const approved = await waitingRun(3600);
    const timedOut = await waitingRun(60);
    const deadline = Date.now() + 60_000;

    expect(await stop(first.child, first.exited)).toBe(0);
    expect(first.output()).toContain("Stopped.");

    const again = start();
    current = again.child;
    await untilListening(again.output);
    const rpcAfter = (JSON.parse(readFileSync(join(dataDir, "devnet.json"), "utf8")) as { rpcUrl: string }).rpcUrl;
    token = await signInWithAccount(base, owner); // the signing key persisted too: a new token works the same
    const secrets = (await (await fetch(`${base}/secrets`, { headers: headers() })).json()) as { data: { name: string }[] };
    expect(secrets.data.map((s) => s.name)).toEqual(["KEEP_ME"]);
    const wallets = (await (await fetch(`${base}/wallets`, { headers: headers() })).json()) as { data: { address: string }[] };
    expect(wallets.data.map((w) => w.address)).toEqual([wallet.address]);
    const nonce = (await (await fetch(`${base}/wallets/${wallet.address}:getNonce`, { headers: headers() })).json()) as { nonce: string };
    expect(nonce.nonce).toBe("0"); // the withdrawal used a nonce key of its own (API.md §19), not key 0
    const listed = (await (await fetch(`${base}/wallets/${wallet.address}/withdrawals`, { headers: headers() })).json()) as {
      data: { id: string; status: string }[];
    };
    expect(listed.data).toEqual([expect.objectContaining({ id: withdrawal.id, status: "confirmed" })]);
    const chain = createPublicClient({ transport: http(rpcAfter) });
    expect(await chain.getBalance({ address: recipient })).toBe(9999n);

    // The waiting run survived the restart: a signal now resumes it from its stored state.
    const signalled = await fetch(`${base}/executions/${approved.executionId}:signal?workflowId=${approved.workflowId}`, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ decision: "approve", payload: 5 }),
    });
    expect(signalled.status).toBe(200);
    const resumed = (await signalled.json()) as { status: string; steps: { id: string; output: { data: unknown } }[] };
    expect(resumed.status).toBe("success");
    expect(resumed.steps.find((s) => s.id === "after")?.output.data).toBe(12);
    // The other's deadline passes after the restart: it ends AWAIT_TIMEOUT within 60 s of it.
    let ended: { status: string; steps: { id: string; errorCode?: string }[] } | undefined;
    while (Date.now() < deadline + 60_000) {
      const read = await fetch(`${base}/executions/${timedOut.executionId}?workflowId=${timedOut.workflowId}`, { headers: headers() });
      ended = (await read.json()) as typeof ended;
      // Past its deadline the wait is resumed (pending) and the run ends: read until it has ended.
      if (ended!.status !== "waiting" && ended!.status !== "pending") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(ended?.status).toBe("failed");
    expect(ended?.steps.find((s) => s.id === "gate")?.errorCode).toBe("AWAIT_TIMEOUT");
    expect(await stop(again.child, again.exited)).toBe(0);
  });
});
