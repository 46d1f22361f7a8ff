/**
 * The access-pattern table (shared/store/README.md) checked against the entities: every entity module is listed,
 * every pattern has its module, and each module defines exactly the record types the table names for it.
 */
import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const readme = readFileSync(join(ROOT, "shared/store/README.md"), "utf8");
const section = (title: string) => readme.split(/^## /m).find((s) => s.startsWith(title))!;

const patterns = [...section("Access patterns").matchAll(/^\| (\d+[a-z]?) \|/gm)].map((m) => m[1]!);
const entities = [...section("Entities").matchAll(/^\| ([\d a-z,]+) \| (.+?) \| `([^`]+)` \|$/gm)].map((m) => ({
  patterns: m[1]!.split(",").map((p) => p.trim()),
  types: [...m[2]!.matchAll(/`([A-Za-z]+)`/g)].map((t) => t[1]!).sort(),
  module: m[3]!,
}));

/** The `type` of every entity a module defines. */
const definedTypes = (module: string) =>
  [...readFileSync(join(ROOT, module), "utf8").matchAll(/defineEntity(?:<[^>]*>)?\(\{\s*type: "([A-Za-z]+)"/g)].map((m) => m[1]!).sort();

describe("the access-pattern table and the entities", () => {
  it("lists every entity module of shared/store/entities", () => {
    const modules = readdirSync(join(ROOT, "shared/store/entities")).map((f) => `shared/store/entities/${f}`);
    expect(entities.map((e) => e.module)).toEqual(expect.arrayContaining(modules));
  });

  it("gives every access pattern its module", () => {
    expect(patterns.length).toBeGreaterThanOrEqual(25);
    expect(entities.flatMap((e) => e.patterns).sort()).toEqual([...patterns].sort());
  });

  it("names exactly the record types each module defines", () => {
    for (const e of entities) expect(definedTypes(e.module), e.module).toEqual(e.types);
  });

  it("no module outside the store and the entities' own modules defines an entity", () => {
    const sources = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? sources(`${dir}/${d.name}`) : d.name.endsWith(".ts") ? [`${dir}/${d.name}`] : [],
      );
    const defining = sources("shared").filter(
      (f) => f !== "shared/store/entity.ts" && /defineEntity(?:<[^>]*>)?\(\{/.test(readFileSync(join(ROOT, f), "utf8")),
    );
    expect(defining.sort()).toEqual(entities.map((e) => e.module).sort());
  });
});
