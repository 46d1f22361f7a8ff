/**
 * The layer map of .dependency-cruiser.cjs (LAYERS): every folder of shared/ is in a layer. The real tree is copied
 * to a temporary directory, folders that no layer names are planted in the copy, and the copy is cruised with the
 * repository's own rules (dependency-cruiser's API, as `npm run deps` runs it): each planted module is reported,
 * whether it imports something, is imported or is neither, and nothing else is. Pure: no stack, a few seconds.
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cruise, type ICruiseOptions, type ICruiseResult } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const SOURCES = ["shared", "functions", "local"];

/** Folders of shared/ that LAYERS does not name, each a different way of being outside every other rule. */
const PLANTED: Record<string, string> = {
  // the case: a new folder importing the composition root passed every layer rule
  "shared/planted/uses-api.ts": 'import { api } from "../service/api";\nexport const groups = api.length;\n',
  "shared/typed/group.ts": 'import type { Group } from "../http/endpoint";\nexport type Named = Group;\n',
  "shared/core-only/read.ts": 'import { readFileSync } from "node:fs";\nexport const read = readFileSync;\n',
  // imports nothing, imported by a placed folder
  "shared/leaf/leaf.ts": "export const leaf = 1;\n",
  // imports nothing, imported by nobody
  "shared/lonely/alone.ts": "export const alone = 1;\n",
};
/** Index files (barrels) in placed folders: one re-exporting, one imported, one alone; each is an error. */
const INDEXES: Record<string, string> = {
  "shared/store/index.ts": 'export { Keys } from "./item-keys";\n',
  "shared/sandbox/index.ts": "export const imported = 1;\n",
  "shared/http/openapi/index.ts": "export const alone = 1;\n",
};
const EXPECTED_INDEXES = [
  "no-index-file shared/store/index.ts → shared/store/item-keys.ts",
  "no-index-file-imported shared/secret/redact.ts → shared/sandbox/index.ts",
  "no-index-file-orphan shared/http/openapi/index.ts → shared/http/openapi/index.ts",
];
const EXPECTED = [
  "shared-folder-in-a-layer shared/core-only/read.ts → fs",
  "shared-folder-in-a-layer shared/planted/uses-api.ts → shared/service/api.ts",
  "shared-folder-in-a-layer shared/typed/group.ts → shared/http/endpoint.ts",
  "shared-folder-in-a-layer-imported shared/service/api.ts → shared/leaf/leaf.ts",
  "shared-folder-in-a-layer-orphan shared/lonely/alone.ts → shared/lonely/alone.ts",
];

let options: ICruiseOptions;
let copy: string;
let result: ICruiseResult;

beforeAll(async () => {
  options = await extractDepcruiseOptions(join(root, ".dependency-cruiser.cjs"));
  copy = mkdtempSync(join(tmpdir(), "wa-layers-"));
  for (const source of SOURCES) cpSync(join(root, source), join(copy, source), { recursive: true });
  for (const file of ["tsconfig.json", "package.json"]) cpSync(join(root, file), join(copy, file));
  symlinkSync(join(root, "node_modules"), join(copy, "node_modules"));
  for (const [path, text] of Object.entries({ ...PLANTED, ...INDEXES })) {
    mkdirSync(dirname(join(copy, path)), { recursive: true });
    writeFileSync(join(copy, path), text);
  }
  appendFileSync(join(copy, "shared/service/api.ts"), 'export { leaf } from "../leaf/leaf";\n');
  appendFileSync(join(copy, "shared/secret/redact.ts"), 'export { imported } from "../sandbox/index";\n');

  const tsConfig = extractTSConfig(join(copy, "tsconfig.json"));
  const { output } = await cruise(SOURCES, { ...options, baseDir: copy, validate: true }, {}, { tsConfig });
  result = output as ICruiseResult;
});

afterAll(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

describe("every folder of shared/ is in a layer", () => {
  it("reports each module of a folder no layer names: importing the composition root, a type, node:fs, imported only, or alone", () => {
    const unplaced = result.summary.violations
      .filter((v) => v.rule.name.startsWith("shared-folder-in-a-layer"))
      .map((v) => `${v.rule.name} ${v.from} → ${v.to}`)
      .sort();
    expect(unplaced).toEqual(EXPECTED);
  });

  it("finds no other violation: the real tree keeps every rule", () => {
    const others = result.summary.violations.filter(
      (v) => !v.rule.name.startsWith("shared-folder-in-a-layer") && !v.rule.name.startsWith("no-index-file"),
    );
    expect(others).toEqual([]);
    expect(result.summary.error).toBe(EXPECTED.length + EXPECTED_INDEXES.length);
    expect(result.summary.totalCruised).toBeGreaterThan(200);
  });

  it("reports every index file in shared/ (no barrels): re-exporting, imported, or alone", () => {
    const indexes = result.summary.violations
      .filter((v) => v.rule.name.startsWith("no-index-file"))
      .map((v) => `${v.rule.name} ${v.from} → ${v.to}`)
      .sort();
    expect(indexes).toEqual(EXPECTED_INDEXES);
  });

  it("names only folders that exist: LAYERS has no stale entry", () => {
    const rule = options.ruleSet?.forbidden?.find((r) => r.name === "shared-folder-in-a-layer");
    const placed = /^\^shared\/\((.+)\)\/$/.exec(String(rule?.from.pathNot))?.[1]?.split("|") ?? [];
    expect(placed.length).toBeGreaterThan(10);
    expect(placed.filter((folder) => !existsSync(join(root, "shared", folder)))).toEqual([]);
  });
});
