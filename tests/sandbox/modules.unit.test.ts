/**
 * The parts of API.md §21.2 that need no VM: leading `import` statements read as `require` (each form, line numbers
 * kept, anything else left alone), and the vendored bundles being exactly the installed packages' builds.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { MODULE_NAMES, moduleSource, rewriteImports } from "../../shared/sandbox/modules";
import bundles from "../../shared/sandbox/modules/bundles.json" with { type: "json" };

describe("rewriteImports", () => {
  it("reads every import form at the top as the same require", () => {
    const cases: [string, string][] = [
      ["import _ from 'lodash'", 'const _ = require("lodash");'],
      ['import dayjs from "dayjs";', 'const dayjs = require("dayjs");'],
      ["import * as uuid from 'uuid'", 'const uuid = require("uuid");'],
      ["import { v4 } from 'uuid'", 'const { v4 } = require("uuid");'],
      ["import { v4 as id, v1, } from 'uuid'", 'const { v4: id, v1 } = require("uuid");'],
      ["import { default as d, extend } from 'dayjs'", 'const d = require("dayjs"), { extend } = require("dayjs");'],
      ["import x, { y } from 'lodash'", 'const x = require("lodash"), { y } = require("lodash");'],
      ["import x, * as ns from 'lodash'", 'const x = require("lodash"), ns = require("lodash");'],
      ["import 'lodash'", 'require("lodash");'],
      ["import$ from 'lodash'", "import$ from 'lodash'"], // an identifier, not the keyword
    ];
    for (const [source, expected] of cases) expect(rewriteImports(source), source).toBe(expected);
  });

  it("keeps the lines, comments and code around the statements, and the code after them untouched", () => {
    const source =
      "// header\n/* a\n   b */ import _ from 'lodash'\nimport {\n  v4,\n  v1\n} from 'uuid'; return _.x + \"import y from 'z'\"";
    const rewritten = rewriteImports(source);
    expect(rewritten).toBe(
      '// header\n/* a\n   b */ const _ = require("lodash");\nconst { v4, v1 } = require("uuid");\n\n\n return _.x + "import y from \'z\'"',
    );
    expect(rewritten.split("\n").length).toBe(source.split("\n").length);
  });

  it("leaves what is not a leading import statement as it is", () => {
    for (const source of [
      "return 1",
      "const a = 1\nimport _ from 'lodash'",
      "return import('lodash')",
      "import.meta",
      "import { } from 'lodash'",
      "import _ from lodash",
      "import _ 'lodash'",
      "import { a b } from 'x'",
      "import _ from 'lod\\u0061sh'",
      "/* never closed import _ from 'lodash'",
    ])
      expect(rewriteImports(source), source).toBe(source);
    // Statements before the first non-import are read; the rest stays for the compiler to refuse.
    expect(rewriteImports("import _ from 'lodash'\nimport from 'x'")).toBe("const _ = require(\"lodash\");\nimport from 'x'");
  });
});

describe("the vendored modules", () => {
  const require = createRequire(import.meta.url);
  const files = bundles as Record<string, { version: string; file: string; source: string }>;

  it("are the installed packages' own builds at the installed versions (npm run sandbox:modules after a bump)", () => {
    expect(Object.keys(files).length).toBeGreaterThan(0);
    for (const [name, bundle] of Object.entries(files)) {
      expect(MODULE_NAMES).toContain(name);
      const manifest = require.resolve(`${name}/package.json`);
      const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
      expect(bundle.version, name).toBe(version);
      expect(bundle.source === readFileSync(join(dirname(manifest), bundle.file), "utf8"), name).toBe(true);
      expect(moduleSource(name)).toBe(bundle.source);
    }
  });

  it("offers no other name, whatever the object's prototype holds", () => {
    for (const name of ["fs", "__proto__", "constructor", "toString", "lodash/fp", "Lodash"]) expect(moduleSource(name)).toBeUndefined();
  });
});
