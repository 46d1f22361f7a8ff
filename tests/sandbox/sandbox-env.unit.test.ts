/**
 * Locally, sandbox workers start with an empty environment (shared/sandbox/pool.ts, workerOptions): a script that
 * escaped QuickJS onto its worker thread would find none of the process's credentials or settings there.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Worker } from "node:worker_threads";
import { defaultPoolOptions, workerOptions } from "../../shared/sandbox/pool";

const planted = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "JWT_SIGNING_KEY", "CHAINS"];
afterEach(() => {
  for (const name of planted) delete process.env[name];
});

describe("a sandbox worker's environment", () => {
  it("is empty: no AWS_* credential, key or setting of the process reaches the worker's process.env", async () => {
    for (const name of planted) process.env[name] = `secret-${name}`;
    // The pool's own options, the worker's script replaced by one that reports what it sees.
    const { workerData: _role, ...options } = workerOptions(defaultPoolOptions({}));
    const worker = new Worker("require('node:worker_threads').parentPort.postMessage(Object.keys(process.env))", {
      ...options,
      eval: true,
    });
    const seen = await new Promise<string[]>((resolve, reject) => worker.once("message", resolve).once("error", reject));
    await worker.terminate();
    expect(seen).toEqual([]);
    expect(Object.keys(process.env)).toEqual(expect.arrayContaining(planted)); // they were there to inherit
  });
});
