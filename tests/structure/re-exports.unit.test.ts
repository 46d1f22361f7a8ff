/**
 * The facade rule of issue 27: no module in shared/ re-exports. Every import names the module that defines what
 * it imports (README "Architecture"), so no file in shared/ passes on another module's names: no `export … from`
 * (`export *`, `export * as ns`, `export { a } from`, `export type { T } from`), and no `export { name }` or
 * `export default name` of a name the file imported. Pure: the TypeScript compiler's parser only, no stack, no
 * types.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const SOURCE_FILE = /\.[cm]?[jt]s$/;

/** Every source file under `dir`, relative to the repository root. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return SOURCE_FILE.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The local names a file's imports bind: default, namespace, named (under their alias) and `import x = …`. */
function importedNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  for (const statement of source.statements) {
    if (ts.isImportEqualsDeclaration(statement)) names.add(statement.name.text);
    if (!ts.isImportDeclaration(statement) || !statement.importClause) continue;
    const { name, namedBindings } = statement.importClause;
    if (name) names.add(name.text);
    if (namedBindings && ts.isNamespaceImport(namedBindings)) names.add(namedBindings.name.text);
    if (namedBindings && ts.isNamedImports(namedBindings)) for (const element of namedBindings.elements) names.add(element.name.text);
  }
  return names;
}

/** Every re-export of one file's text, as `path:line` and the statement's text. */
function reExports(path: string, text: string): string[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const imported = importedNames(source);
  const report = (statement: ts.Statement) => {
    const line = source.getLineAndCharacterOfPosition(statement.getStart(source)).line + 1;
    return `${path}:${line} ${statement.getText(source).replace(/\s+/g, " ")}`;
  };
  return source.statements.flatMap((statement) => {
    if (ts.isExportDeclaration(statement)) {
      if (statement.moduleSpecifier) return [report(statement)];
      const clause = statement.exportClause;
      const passed =
        clause && ts.isNamedExports(clause) ? clause.elements.filter((e) => imported.has((e.propertyName ?? e.name).text)) : [];
      return passed.length ? [report(statement)] : [];
    }
    if (ts.isExportAssignment(statement) && ts.isIdentifier(statement.expression) && imported.has(statement.expression.text)) {
      return [report(statement)];
    }
    return [];
  });
}

describe("re-exports", () => {
  it("no module in shared/ re-exports (no export … from, no export *, no export { name } of an imported name)", () => {
    const files = sourceFiles("shared");
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((path) => reExports(path, readFileSync(join(root, path), "utf8")))).toEqual([]);
  });

  it("reports every form of re-export with its path and line, and leaves a module's own exports alone", () => {
    const text = [
      `import * as v from "valibot";`,
      `import { holds, type Query as Q } from "./match";`,
      `import fallback from "./fallback";`,
      `export const own = 1;`,
      `const local = 2;`,
      `export { local, local as alias };`,
      `export type Own = v.InferOutput<typeof v.string>;`,
      `export function define() { return holds; }`,
      `export * from "./schemas";`,
      `export * as Kinds from "./kinds";`,
      `export { list, count as total } from "./list";`,
      `export type { Record } from "./record";`,
      `export {\n  holds,\n};`,
      `export { local as again, type Q };`,
      `export { v };`,
      `export default fallback;`,
    ].join("\n");
    const lineOf = (marker: string) => text.slice(0, text.indexOf(marker)).split("\n").length;
    expect(reExports("shared/planted.ts", text)).toEqual([
      `shared/planted.ts:${lineOf("export * from")} export * from "./schemas";`,
      `shared/planted.ts:${lineOf("export * as")} export * as Kinds from "./kinds";`,
      `shared/planted.ts:${lineOf("export { list")} export { list, count as total } from "./list";`,
      `shared/planted.ts:${lineOf("export type { Record }")} export type { Record } from "./record";`,
      `shared/planted.ts:${lineOf("export {\n  holds")} export { holds, };`,
      `shared/planted.ts:${lineOf("export { local as again")} export { local as again, type Q };`,
      `shared/planted.ts:${lineOf("export { v }")} export { v };`,
      `shared/planted.ts:${lineOf("export default")} export default fallback;`,
    ]);
  });
});
