/**
 * `npm run openapi:lint` (also in CI): the OpenAPI document built as the server builds it for `/openapi.json`
 * (buildDocument with the settings of this environment; no server, no store), written to a temporary file and
 * linted by Redocly CLI with redocly.yaml (the `recommended` ruleset). Any error or warning fails.
 *
 *   npm run openapi:lint
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildConfig } from "../shared/config";
import { buildDocument } from "../shared/service/openapi";

interface Problem {
  ruleId: string;
  severity: string;
  message: string;
  location: { pointer?: string }[];
}
interface Report {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Problem[];
}

const root = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "openapi-lint-"));
try {
  const file = join(dir, "openapi.json");
  writeFileSync(file, JSON.stringify(buildDocument(buildConfig()), null, 2));
  const run = spawnSync(
    join(root, "node_modules", ".bin", "redocly"),
    ["lint", file, "--config", join(root, "redocly.yaml"), "--format", "json", "--max-problems", "1000"],
    { cwd: root, encoding: "utf8", env: { ...process.env, REDOCLY_TELEMETRY: "off" } },
  );
  const start = run.stdout.indexOf("{");
  if (start < 0) {
    process.stderr.write(run.stdout + run.stderr);
    throw new Error(`redocly lint gave no report (exit ${run.status})`);
  }
  const report = JSON.parse(run.stdout.slice(start)) as Report;
  for (const p of report.problems) console.log(`${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? "?"}: ${p.message}`);
  const { errors, warnings } = report.totals;
  console.log(`redocly lint (recommended): ${errors} errors, ${warnings} warnings`);
  if (errors + warnings > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
