/**
 * The sandbox pool inside a deploy bundle (API.md §18.1: the same pool code in each warm Lambda instance):
 * an entry point bundled as SST bundles a function (bench/lambda-bundle.ts) evaluates a script on a worker
 * thread started from the bundle itself, with no TypeScript loader and no node_modules beside it.
 */
import { describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleLambda } from "../../bench/lambda-bundle";

describe("the sandbox pool in a bundle", () => {
  it("runs a script on a worker started from the bundle", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wa-sandbox-bundle-"));
    try {
      const outfile = join(dir, "index.mjs");
      await bundleLambda("tests/fixtures/sandbox-entry.ts", outfile);
      const out = execFileSync(process.execPath, [outfile, "run"], { cwd: dir, encoding: "utf8", timeout: 30_000 });
      expect(JSON.parse(out.trim())).toEqual({ ok: true, value: { sum: 42 }, log: "" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
