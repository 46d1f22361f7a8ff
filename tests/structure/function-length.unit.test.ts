/**
 * The size rule of issue 27: no function in shared/, functions/ or local/ is longer than MAX_LINES lines, from the
 * line its declaration starts on to the line it ends on. Every kind of function counts: declarations, methods,
 * constructors, accessors, function expressions and arrows, nested ones measured on their own (a closure inside a
 * long function is reported as well as the function). A long function is split into named steps, or its state
 * becomes an object; it is never allowed here. Pure: the TypeScript compiler's parser only, no stack, no types.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const SOURCES = ["shared", "functions", "local"];
const MAX_LINES = 120;
const SOURCE_FILE = /\.[cm]?[jt]s$/;

interface Measured {
  path: string;
  line: number;
  name: string;
  lines: number;
}

/** Every source file under `dir`, relative to the repository root. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return SOURCE_FILE.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

const isFunction = (node: ts.Node): node is ts.FunctionLikeDeclaration =>
  ts.isFunctionDeclaration(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node) ||
  ts.isFunctionExpression(node) ||
  ts.isArrowFunction(node);

/** The name a reader looks for: its own, else the variable, property or class member it is assigned to. */
function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return "constructor";
  if (node.name) return node.name.getText(source);
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) {
    return parent.name.getText(source);
  }
  return "<anonymous>";
}

/** The length in lines of every function of one file's text. */
function measure(path: string, text: string): Measured[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: Measured[] = [];
  const visit = (node: ts.Node) => {
    if (isFunction(node)) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ path, line: start + 1, name: nameOf(node, source), lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const tooLong = (functions: Measured[]) =>
  functions.filter((f) => f.lines > MAX_LINES).map((f) => `${f.path}:${f.line} ${f.name} (${f.lines} lines)`);

describe("function length", () => {
  it(`no function, method, constructor or arrow in ${SOURCES.join("/, ")}/ is longer than ${MAX_LINES} lines`, () => {
    const files = SOURCES.flatMap(sourceFiles);
    expect(files.length).toBeGreaterThan(100);
    const functions = files.flatMap((path) => measure(path, readFileSync(join(root, path), "utf8")));
    expect(tooLong(functions)).toEqual([]);
  });

  it("reports each kind of function past the limit with its path, line, name and length, and none at the limit", () => {
    const body = (lines: number) => Array.from({ length: lines - 2 }, (_, i) => `  step(${i});`).join("\n");
    const text = [
      `function atLimit() {\n${body(MAX_LINES)}\n}`,
      `export async function declared() {\n${body(MAX_LINES + 1)}\n}`,
      `const arrow = () => {\n${body(MAX_LINES + 1)}\n};`,
      `class Holder {\n  constructor() {\n${body(MAX_LINES + 1)}\n  }\n  method() {\n${body(MAX_LINES + 1)}\n  }\n  get value() {\n${body(MAX_LINES + 1)}\n  }\n}`,
      `const table = { entry: function () {\n${body(MAX_LINES + 1)}\n} };`,
    ].join("\n");
    const lineOf = (marker: string) => text.slice(0, text.indexOf(marker)).split("\n").length;
    expect(tooLong(measure("shared/planted.ts", text))).toEqual([
      `shared/planted.ts:${lineOf("export async function declared")} declared (121 lines)`,
      `shared/planted.ts:${lineOf("const arrow")} arrow (121 lines)`,
      `shared/planted.ts:${lineOf("constructor()")} constructor (121 lines)`,
      `shared/planted.ts:${lineOf("method()")} method (121 lines)`,
      `shared/planted.ts:${lineOf("get value()")} value (121 lines)`,
      `shared/planted.ts:${lineOf("entry: function")} entry (121 lines)`,
    ]);
  });
});
