/**
 * Modules a script may load (API.md §21.2): `lodash`, `dayjs` and `uuid`, by `require('<name>')` or by
 * `import` statements at the top of a customCode source, read as the same `require`.
 *
 * The modules' sources are the packages' own single-file builds, vendored in ./modules/bundles.json (written by
 * ./modules/build.ts from node_modules at the pinned versions). They are evaluated inside the VM, lazily: only a
 * script that calls `require` pays for it, within its own time and memory limits, and each evaluation gets its
 * own module objects (its instance is fresh: ./quickjs.ts), so a script that changes `_.map` changes nobody
 * else's. QuickJS's bytecode cannot be carried from one instance to another here (quickjs-emscripten writes
 * objects without JS_WRITE_OBJ_BYTECODE), so each load compiles the source again.
 */
import bundles from "./modules/bundles.json" with { type: "json" };

/** The names the contract offers, in the order the error message lists them. */
export const MODULE_NAMES = ["dayjs", "lodash", "uuid"] as const;

const sources = new Map<string, string>(Object.entries(bundles as Record<string, { source: string }>).map(([n, b]) => [n, b.source]));

/** The source of a module the contract offers and this build carries; undefined for any other name. */
export const moduleSource = (name: string): string | undefined =>
  (MODULE_NAMES as readonly string[]).includes(name) ? sources.get(name) : undefined;

/** What `require` throws for a name it does not offer (the step fails SANDBOX_ERROR with it). */
export const unavailableModule = `is not available (available: ${MODULE_NAMES.join(", ")})`;

// ---------------------------------------------------------------------------------------------------------
// `import` at the top of a script, read as `require`.

const IDENTIFIER = /[A-Za-z_$][\w$]*/y;
const isIdentifierChar = (c: string | undefined) => c !== undefined && /[\w$]/.test(c);

/**
 * The source with its leading `import` statements replaced by `const` declarations that `require` the same
 * module, each on the lines the statement took (so line numbers hold):
 *
 *   import _ from 'lodash'                 const _ = require("lodash");
 *   import * as u from 'uuid'              const u = require("uuid");
 *   import { v4, v1 as one } from 'uuid'   const { v4, v1: one } = require("uuid");
 *   import d, { extend } from 'dayjs'      const d = require("dayjs"), { extend } = require("dayjs");
 *   import 'lodash'                        require("lodash");
 *
 * A default import is the module's exports, as when Node imports a CommonJS module. Only statements before any
 * other code are read (comments and blank lines may come between); anything else, a malformed statement
 * included, is left as it is and fails as a syntax error.
 */
export function rewriteImports(source: string): string {
  let out = "";
  let at = 0;
  for (;;) {
    const start = skipTrivia(source, at);
    const statement = readImport(source, start);
    if (!statement) return at === 0 ? source : out + source.slice(at);
    const lines = source.slice(start, statement.end).split("\n").length - 1;
    out += source.slice(at, start) + statement.code + "\n".repeat(lines);
    at = statement.end;
  }
}

/** Past whitespace and comments. */
function skipTrivia(s: string, at: number): number {
  for (;;) {
    while (at < s.length && /\s/.test(s[at]!)) at++;
    if (s.startsWith("//", at)) {
      const end = s.indexOf("\n", at);
      at = end === -1 ? s.length : end;
    } else if (s.startsWith("/*", at)) {
      const end = s.indexOf("*/", at + 2);
      if (end === -1) return at;
      at = end + 2;
    } else return at;
  }
}

/** One `import … from '<name>'` statement starting at `at`: its replacement and where it ends. */
function readImport(s: string, at: number): { code: string; end: number } | undefined {
  if (!s.startsWith("import", at) || isIdentifierChar(s[at + 6])) return undefined;
  let i = skipTrivia(s, at + 6);
  const bare = readString(s, i);
  if (bare) return { code: `require(${JSON.stringify(bare.value)});`, end: endOfStatement(s, bare.end) };
  const bindings: string[] = []; // each `<pattern> = ` without the require
  const local = readIdentifier(s, i);
  if (local) {
    bindings.push(local.value);
    i = skipTrivia(s, local.end);
    if (s[i] === ",") i = skipTrivia(s, i + 1);
    else return finish(s, i, bindings);
  }
  if (s[i] === "*") {
    i = skipTrivia(s, i + 1);
    const as = readIdentifier(s, i);
    const name = as?.value === "as" ? readIdentifier(s, skipTrivia(s, as.end)) : undefined;
    if (!name) return undefined;
    bindings.push(name.value);
    return finish(s, skipTrivia(s, name.end), bindings);
  }
  if (s[i] !== "{") return undefined;
  const named = readNamed(s, i + 1);
  if (!named) return undefined;
  bindings.push(...named.bindings);
  return finish(s, skipTrivia(s, named.end), bindings);
}

/** `from '<name>'` and the end of the statement: the declarations. */
function finish(s: string, at: number, bindings: string[]): { code: string; end: number } | undefined {
  const from = readIdentifier(s, at);
  if (from?.value !== "from") return undefined;
  const name = readString(s, skipTrivia(s, from.end));
  if (!name || bindings.length === 0) return undefined;
  const call = `require(${JSON.stringify(name.value)})`;
  return { code: `const ${bindings.map((b) => `${b} = ${call}`).join(", ")};`, end: endOfStatement(s, name.end) };
}

/** `a, b as c, default as d }` → bindings (`{ a, b: c }`, `d`), and the position after `}`. */
function readNamed(s: string, at: number): { bindings: string[]; end: number } | undefined {
  const pairs: string[] = [];
  const defaults: string[] = [];
  let i = skipTrivia(s, at);
  while (s[i] !== "}") {
    const imported = readIdentifier(s, i);
    if (!imported) return undefined;
    i = skipTrivia(s, imported.end);
    let local = imported.value;
    const as = readIdentifier(s, i);
    if (as?.value === "as") {
      const name = readIdentifier(s, skipTrivia(s, as.end));
      if (!name) return undefined;
      local = name.value;
      i = skipTrivia(s, name.end);
    }
    if (imported.value === "default") defaults.push(local);
    else pairs.push(local === imported.value ? local : `${imported.value}: ${local}`);
    if (s[i] === ",") i = skipTrivia(s, i + 1);
    else if (s[i] !== "}") return undefined;
  }
  const bindings = [...defaults, ...(pairs.length > 0 ? [`{ ${pairs.join(", ")} }`] : [])];
  return bindings.length > 0 ? { bindings, end: i + 1 } : undefined;
}

function readIdentifier(s: string, at: number): { value: string; end: number } | undefined {
  IDENTIFIER.lastIndex = at;
  const match = IDENTIFIER.exec(s);
  return match ? { value: match[0], end: at + match[0].length } : undefined;
}

/** A quoted module name (no escapes: no module name needs one). */
function readString(s: string, at: number): { value: string; end: number } | undefined {
  const quote = s[at];
  if (quote !== "'" && quote !== '"') return undefined;
  const end = s.indexOf(quote, at + 1);
  if (end === -1) return undefined;
  const value = s.slice(at + 1, end);
  return /[\\\n]/.test(value) ? undefined : { value, end: end + 1 };
}

/** After an optional `;` on the statement's own line. */
function endOfStatement(s: string, at: number): number {
  let i = at;
  while (s[i] === " " || s[i] === "\t") i++;
  return s[i] === ";" ? i + 1 : at;
}
