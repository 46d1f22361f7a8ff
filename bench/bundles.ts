/**
 * The Lambda budget: every entry point in functions/ bundled as a deploy bundles it (bench/lambda-bundle.ts),
 * its minified size and its import time in a fresh Node process (median of interleaved runs), each beside
 * a baseline bundle of the libraries that function cannot do without (bench/baselines/), measured in the
 * same run. The ratios say what our own code and any unneeded package cost at a cold start.
 *
 *   npx tsx bench/bundles.ts        (also part of `npm run bench`)
 *   BENCH_IMPORT_RUNS=15 npx tsx bench/bundles.ts
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { bundleLambda, lambdaEntries, type LambdaBundle } from "./lambda-bundle";

/** Which baseline(s) each function is compared with, and what they hold (each file's header says why). */
export const BASELINES: Record<string, { file: string; holds: string }[]> = {
  core: [{ file: "bench/baselines/core.ts", holds: "hono+DynamoDB+KMS+jose+valibot+noble secp256k1/keccak" }],
  secrets: [{ file: "bench/baselines/secrets.ts", holds: "hono+DynamoDB+KMS+jose+valibot" }],
  wallets: [{ file: "bench/baselines/wallets.ts", holds: "hono+DynamoDB+KMS+jose+valibot+viem clients" }],
  executions: [{ file: "bench/baselines/executions.ts", holds: "hono+DynamoDB+jose+valibot" }],
  stream: [{ file: "bench/baselines/stream.ts", holds: "hono streaming+DynamoDB+jose+valibot" }],
  workflows: [
    { file: "bench/baselines/workflows-clients.ts", holds: "hono+DynamoDB+KMS+EventBridge+Scheduler+jose+valibot" },
    { file: "bench/baselines/workflows-engine.ts", holds: "the same + viem clients+croner+QuickJS" },
  ],
  runner: [{ file: "bench/baselines/runner.ts", holds: "DynamoDB+KMS+Scheduler+viem clients+croner+QuickJS" }],
  schedule: [{ file: "bench/baselines/schedule.ts", holds: "DynamoDB+EventBridge+Scheduler+croner" }],
  watcher: [{ file: "bench/baselines/watcher.ts", holds: "DynamoDB+EventBridge+Scheduler+viem public client" }],
  sandbox: [{ file: "bench/baselines/sandbox.ts", holds: "QuickJS, plain handler" }],
  sweeper: [
    { file: "bench/baselines/sweeper.ts", holds: "lib-dynamodb, plain handler" },
    { file: "bench/baselines/sweeper-bundler.ts", holds: "lib-dynamodb+viem bundler client" },
  ],
};

/** Issue 8's budget: at most these ratios to the baseline. */
export const BUDGET: Record<string, { size: number; importTime: number }> = {
  secrets: { size: 1.1, importTime: 1.15 },
};

/** What the bundles need at import time: SST's linked resources as SST passes them, nothing from this shell. */
const IMPORT_ENV = {
  PATH: process.env.PATH ?? "",
  AWS_REGION: "us-east-1",
  SST_RESOURCE_Table: JSON.stringify({ name: "bench" }),
  SST_RESOURCE_JwtSigningKey: JSON.stringify({ value: "unused at import" }),
  SST_RESOURCE_Bus: JSON.stringify({ name: "bench" }),
  SANDBOX_FUNCTION: "bench",
  NODE_NO_WARNINGS: "1",
};

/** Milliseconds from `import()` to the module being evaluated, in a fresh Node process. */
function importTime(file: string): number {
  // The Lambda runtime's global for response streaming (functions/stream.ts) exists before the handler loads.
  const awslambda = "globalThis.awslambda = { streamifyResponse: (f) => f, HttpResponseStream: { from: (s) => s } };";
  const script = `${awslambda} const t = performance.now(); await import(${JSON.stringify(pathToFileURL(file).href)}); process.stdout.write(String(performance.now() - t));`;
  let out: string;
  try {
    out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      env: IMPORT_ENV,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    // Node prints the minified source line of a throw: keep only the error lines.
    const stderr = String((err as { stderr?: unknown }).stderr ?? "");
    const message = stderr
      .split("\n")
      .filter((l) => /^\w*Error\b|^\s+at /.test(l))
      .slice(0, 6)
      .join("\n");
    throw new Error(`importing ${file} failed:\n${message || stderr.slice(-500)}`);
  }
  const ms = Number(out);
  if (!Number.isFinite(ms)) throw new Error(`importing ${file} printed ${JSON.stringify(out)}`);
  return ms;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KB`;

export interface BundleRow {
  fn: string;
  bytes: number;
  importMs: number;
  baseline?: { holds: string; bytes: number; importMs: number };
}

export async function benchBundles(options: { runs?: number } = {}): Promise<BundleRow[]> {
  const runs = Math.max(7, options.runs ?? Number(process.env.BENCH_IMPORT_RUNS ?? 11));
  const dir = mkdtempSync(join(tmpdir(), "wa-bundles-"));
  try {
    const functions = await Promise.all(lambdaEntries().map((entry) => bundleLambda(entry, join(dir, `${nameOf(entry)}.mjs`))));
    const baselineFiles = [
      ...new Set(
        Object.values(BASELINES)
          .flat()
          .map((b) => b.file),
      ),
    ];
    const baselines = new Map<string, LambdaBundle>();
    for (const file of baselineFiles) baselines.set(file, await bundleLambda(file, join(dir, `baseline-${nameOf(file)}.mjs`)));

    // Interleaved rounds (every bundle once per round) so drift in machine load hits all alike; round 0 warms the file cache.
    const files = [
      ...functions.map((f) => join(dir, `${f.name}.mjs`)),
      ...baselineFiles.map((f) => join(dir, `baseline-${nameOf(f)}.mjs`)),
    ];
    const times = new Map<string, number[]>(files.map((f) => [f, []]));
    for (let round = 0; round <= runs; round++) {
      for (const file of files) {
        const ms = importTime(file);
        if (round > 0) times.get(file)!.push(ms);
      }
    }
    const importMs = (file: string) => median(times.get(file)!);

    const rows: BundleRow[] = [];
    for (const f of functions) {
      const own = { fn: `${f.name}.ts`, bytes: f.bytes, importMs: importMs(join(dir, `${f.name}.mjs`)) };
      const compared = BASELINES[f.name] ?? [];
      if (compared.length === 0) rows.push(own);
      for (const b of compared) {
        const bundle = baselines.get(b.file)!;
        rows.push({
          ...own,
          baseline: { holds: b.holds, bytes: bundle.bytes, importMs: importMs(join(dir, `baseline-${nameOf(b.file)}.mjs`)) },
        });
      }
    }
    print(rows, functions, runs);
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function nameOf(file: string) {
  return file
    .split("/")
    .pop()!
    .replace(/\.[cm]?[tj]s$/, "");
}

function print(rows: BundleRow[], functions: LambdaBundle[], runs: number) {
  const header = ["function", "bundle", "import ms", "baseline", "bundle", "import ms", "size ratio", "import ratio"];
  const cells = rows.map((r) => [
    r.fn,
    kb(r.bytes),
    r.importMs.toFixed(1),
    r.baseline?.holds ?? "(no baseline declared in bench/bundles.ts)",
    r.baseline ? kb(r.baseline.bytes) : "",
    r.baseline ? r.baseline.importMs.toFixed(1) : "",
    r.baseline ? `${(r.bytes / r.baseline.bytes).toFixed(2)}x` : "",
    r.baseline ? `${(r.importMs / r.baseline.importMs).toFixed(2)}x` : "",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((s, i) => (i === 1 || i === 2 || i >= 4 ? s.padStart(widths[i]!) : s.padEnd(widths[i]!))).join("  ");
  console.log(
    `\nLambda bundles (esbuild as a deploy builds them: minified ESM, target node22) and their import time in a fresh` +
      ` Node ${process.version} process, median of ${runs} interleaved runs\n`,
  );
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const c of cells) console.log(line(c));

  for (const [fn, budget] of Object.entries(BUDGET)) {
    for (const r of rows.filter((row) => row.fn === `${fn}.ts` && row.baseline)) {
      const size = r.bytes / r.baseline!.bytes;
      const time = r.importMs / r.baseline!.importMs;
      const ok = size <= budget.size && time <= budget.importTime;
      console.log(
        `\nbudget ${fn}: size ${size.toFixed(2)}x (at most ${budget.size}x), import ${time.toFixed(2)}x (at most ${budget.importTime}x): ${ok ? "within" : "OVER"}`,
      );
    }
  }
  console.log("\nlargest parts (KB in the minified output):");
  for (const f of functions) {
    const top = [...f.packages].sort((a, b) => b[1] - a[1]).slice(0, 8);
    console.log(`  ${`${f.name}.ts`.padEnd(12)} ${top.map(([pkg, bytes]) => `${pkg} ${(bytes / 1024).toFixed(0)}`).join(" | ")}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchBundles().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
