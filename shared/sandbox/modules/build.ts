/**
 * Writes shared/sandbox/modules/bundles.json: the single-file builds of the modules a script may load (API.md
 * §21.2), read from node_modules at the versions package.json pins, so the sandbox (and a Lambda bundle) carries
 * them without node_modules at run time.
 *
 *   npx tsx shared/sandbox/modules/build.ts        (also: npm run sandbox:modules)
 *
 * Each package's own minified UMD/CommonJS build is taken as published (licence comment included); nothing is
 * transformed. A package that is not installed is left out and the script exits 1 naming it.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));

/** Module name → its single-file build inside the package. */
const FILES = {
  dayjs: "dayjs.min.js",
  lodash: "lodash.min.js",
  uuid: "dist/umd/uuid.min.js",
} as const;

const bundles: Record<string, { version: string; file: string; source: string }> = {};
const missing: string[] = [];
for (const [name, file] of Object.entries(FILES)) {
  let manifest: string;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch {
    missing.push(name);
    continue;
  }
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
  bundles[name] = { version, file, source: readFileSync(join(dirname(manifest), file), "utf8") };
}
writeFileSync(join(here, "bundles.json"), JSON.stringify(bundles, null, 2) + "\n");
for (const [name, { version }] of Object.entries(bundles)) console.log(`${name}@${version}`);
if (missing.length > 0) {
  console.error(`not installed, left out: ${missing.join(", ")}`);
  process.exitCode = 1;
}
