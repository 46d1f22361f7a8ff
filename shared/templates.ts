/**
 * Templates and variables (API.md §8.6): the `{{ path }}` grammar, finding templates in strings, resolving a
 * path against the variables of a step, and rendering values into strings and whole configs.
 *
 *     path       = identifier *( "." identifier / "." digits / "[" digits "]" / "['" text "']" / "[\"" text "\"]" )
 *     identifier = [A-Za-z_$][A-Za-z0-9_$]*
 *
 * Pure: no I/O, no chain code. The definition layer (shared/workflow) uses it to validate templated fields and
 * the ancestor rule; the engine uses it to expand configs at run time. Values the engine holds as JSON text
 * (./json-text.ts) are read by path without parsing the rest.
 */
import { JsonText, member, parse, stringify } from "./json-text";

const TEMPLATE_UNRESOLVED = "TEMPLATE_UNRESOLVED";
export const PATHS_ONLY_MESSAGE = "templates accept paths only; use a customCode node for expressions";

/** JavaScript reserved words and literals, and the service's own roots: not allowed as trigger or node names. */
const JS_RESERVED_WORDS = [
  "break",
  "case",
  "catch",
  "class",
  "const",
  "continue",
  "debugger",
  "default",
  "delete",
  "do",
  "else",
  "enum",
  "export",
  "extends",
  "false",
  "finally",
  "for",
  "function",
  "if",
  "implements",
  "import",
  "in",
  "instanceof",
  "interface",
  "let",
  "new",
  "null",
  "package",
  "private",
  "protected",
  "public",
  "return",
  "static",
  "super",
  "switch",
  "this",
  "throw",
  "true",
  "try",
  "typeof",
  "var",
  "void",
  "while",
  "with",
  "yield",
  "await",
  "undefined",
  "NaN",
  "Infinity",
  "eval",
  "arguments",
  "globalThis",
  "console",
] as const;
/** Roots the service provides to every step (§8.6 table); `value` and `index` only inside filter and loop. */
const SERVICE_ROOTS = ["secrets", "apContext", "context", "date", "settings", "value", "index"] as const;
export const RESERVED_WORDS: readonly string[] = [...JS_RESERVED_WORDS, ...SERVICE_ROOTS];
const RESERVED = new Set<string>(RESERVED_WORDS);
export const isReservedWord = (word: string): boolean => RESERVED.has(word);

// ---------------------------------------------------------------------------------------------------------
// Grammar

const IDENTIFIER_SOURCE = "[A-Za-z_$][A-Za-z0-9_$]*";
const SEGMENT_SOURCE = `\\.${IDENTIFIER_SOURCE}|\\.[0-9]+|\\[[0-9]+\\]|\\['[^']*'\\]|\\["[^"]*"\\]`;
/** The path grammar as a regular expression source (no anchors), usable in JSON Schema patterns. */
const PATH_SOURCE = `${IDENTIFIER_SOURCE}(?:${SEGMENT_SOURCE})*`;
const PATH_EXACT = new RegExp(`^${PATH_SOURCE}$`);
const PATH_AT = new RegExp(PATH_SOURCE, "y");
const SEGMENT_AT = new RegExp(SEGMENT_SOURCE, "y");
const SPACES_AT = /\s*/y;

/**
 * One step of a path. `index` segments (`.0`, `[0]`) index arrays, or select the key of that spelling on
 * objects; `key` segments (`.name`, `['text']`, `["text"]`) select object keys only.
 */
type PathSegment = { kind: "key"; key: string } | { kind: "index"; key: string; index: number };

export interface TemplatePath {
  /** The path as written (spaces around it removed): what TEMPLATE_UNRESOLVED and step `inputs` name. */
  text: string;
  root: string;
  segments: PathSegment[];
}

/**
 * Parsed paths by text: a config may repeat one template thousands of times (`{{A.data}}` × 30,000 in 300 KB),
 * and each parse costs microseconds on the thread that serves every owner. Bounded; emptied when full.
 */
const parsed = new Map<string, TemplatePath | null>();
const PARSED_MAX = 4_096;

/** Parses a path; null when `text` is not exactly a path of the grammar. The answer is shared: never change it. */
export function parsePath(text: string): TemplatePath | null {
  let path = parsed.get(text);
  if (path !== undefined) return path;
  path = parseUncached(text);
  if (parsed.size >= PARSED_MAX) parsed.clear();
  if (text.length <= 256) parsed.set(text, path);
  return path;
}

function parseUncached(text: string): TemplatePath | null {
  if (!PATH_EXACT.test(text)) return null;
  const root = /^[A-Za-z_$][A-Za-z0-9_$]*/.exec(text)![0];
  const segments: PathSegment[] = [];
  SEGMENT_AT.lastIndex = root.length;
  for (let m = SEGMENT_AT.exec(text); m; m = SEGMENT_AT.exec(text)) {
    const s = m[0];
    if (s.startsWith('["') || s.startsWith("['")) segments.push({ kind: "key", key: s.slice(2, -2) });
    else if (s.startsWith("[")) segments.push(indexSegment(s.slice(1, -1)));
    else if (/^\.[0-9]/.test(s)) segments.push(indexSegment(s.slice(1)));
    else segments.push({ kind: "key", key: s.slice(1) });
  }
  return { text, root, segments };
}

const indexSegment = (digits: string): PathSegment => ({ kind: "index", key: digits, index: Number(digits) });

/** One `{{ … }}` in a string. `path` is null when the content is not a path (an expression, or unclosed). */
export interface TemplateOccurrence {
  start: number;
  /** Index just after the closing braces (the string's length when unclosed). */
  end: number;
  raw: string;
  path: TemplatePath | null;
}

/**
 * Every `{{` of `text` in order. A path is recognised first (so `['}}']` inside a path is fine); otherwise the
 * occurrence runs to the next `}}`, or to the end of the string when there is none.
 */
export function findTemplates(text: string): TemplateOccurrence[] {
  const found: TemplateOccurrence[] = [];
  let from = 0;
  for (let start = text.indexOf("{{", from); start >= 0; start = text.indexOf("{{", from)) {
    let at = start + 2;
    SPACES_AT.lastIndex = at;
    at += SPACES_AT.exec(text)![0].length;
    PATH_AT.lastIndex = at;
    const match = PATH_AT.exec(text);
    if (match) {
      let after = at + match[0].length;
      SPACES_AT.lastIndex = after;
      after += SPACES_AT.exec(text)![0].length;
      if (text.startsWith("}}", after)) {
        found.push({ start, end: after + 2, raw: text.slice(start, after + 2), path: parsePath(match[0]) });
        from = after + 2;
        continue;
      }
    }
    const close = text.indexOf("}}", start + 2);
    const end = close < 0 ? text.length : close + 2;
    found.push({ start, end, raw: text.slice(start, end), path: null });
    from = end;
  }
  return found;
}

export const hasTemplate = (text: string): boolean => text.includes("{{");

/** For a templated field: null when every `{{ … }}` is a path, else the message create answers with. */
export function templateProblem(text: string): string | null {
  if (!hasTemplate(text)) return null;
  return findTemplates(text).every((t) => t.path !== null) ? null : PATHS_ONLY_MESSAGE;
}

const WHOLE_TEMPLATE = new RegExp(`^\\{\\{\\s*(${PATH_SOURCE})\\s*\\}\\}$`);
/** Source of the `inputVariable` rule of filter and loop: one whole template, or a bare path. */
export const WHOLE_TEMPLATE_OR_PATH_SOURCE = `^(?:\\{\\{\\s*${PATH_SOURCE}\\s*\\}\\}|${PATH_SOURCE})$`;

/** The path of a filter/loop `inputVariable` (`{{fetch.data.items}}` or `fetch.data.items`); null if neither. */
export function wholeTemplatePath(inputVariable: string): TemplatePath | null {
  const m = WHOLE_TEMPLATE.exec(inputVariable);
  return parsePath(m ? m[1]! : inputVariable);
}

/**
 * API.md §17.6: a branch or filter expression whose whole text, trimmed, is one template `{{ E }}` around a
 * JavaScript expression `E` (not a path): `E`, to evaluate as it is. Null when the text is anything else, and
 * when every `{{ … }}` in it is a path (`{{ a.b }}`, `{{ a }} + {{ b }}`), which keeps §8.6's substitution. Such
 * text never was valid JavaScript (an expression cannot begin with `{{`), so nothing valid changes meaning.
 */
export function templateExpression(text: string): string | null {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{{") || !trimmed.endsWith("}}") || trimmed.length < 4) return null;
  if (findTemplates(trimmed).every((t) => t.path !== null)) return null;
  return trimmed.slice(2, -2);
}

// ---------------------------------------------------------------------------------------------------------
// Resolution

/** A path that did not resolve; a step fails with errorCode TEMPLATE_UNRESOLVED and this message. */
export class TemplateUnresolvedError extends Error {
  readonly code = TEMPLATE_UNRESOLVED;
  constructor(readonly path: string) {
    super(`unresolved template variable: ${path}`);
    this.name = "TemplateUnresolvedError";
  }
}

export type Variables = Readonly<Record<string, unknown>>;

const own = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

/**
 * The value at `path`. Throws TemplateUnresolvedError for an unknown root, a missing key, an index out of
 * range, or a step through `null` or a primitive; a value that is `undefined` counts as missing, so nothing
 * ever resolves to `undefined`. Only own properties are visible (no `constructor`, `__proto__`...).
 */
export function resolvePath(path: TemplatePath | string, variables: Variables): unknown {
  const parsed = typeof path === "string" ? parsePath(path) : path;
  if (!parsed) throw new TemplateUnresolvedError(String(path));
  const fail = () => new TemplateUnresolvedError(parsed.text);
  if (!own(variables, parsed.root)) throw fail();
  let current: unknown = variables[parsed.root];
  for (const segment of parsed.segments) {
    if (current instanceof JsonText) {
      // A value held as text (§18.2): the rest of the path is read out of it, and only that part parsed.
      current = member(current, segment);
      if (current === undefined) throw fail();
      continue;
    }
    if (current === null || typeof current !== "object") throw fail();
    if (Array.isArray(current)) {
      if (segment.kind !== "index" || segment.index >= current.length) throw fail();
      current = current[segment.index];
    } else {
      if (!own(current, segment.key)) throw fail();
      current = (current as Record<string, unknown>)[segment.key];
    }
    if (current === undefined) throw fail();
  }
  if (current === undefined) throw fail();
  if (current instanceof JsonText && !current.isContainer) return parse(current);
  return current;
}

/** filter/loop `inputVariable`: the resolved value itself, not its string. */
export function resolveWhole(inputVariable: string, variables: Variables): unknown {
  const path = wholeTemplatePath(inputVariable);
  if (!path) throw new TemplateUnresolvedError(inputVariable);
  return resolvePath(path, variables);
}

// ---------------------------------------------------------------------------------------------------------
// Rendering

/**
 * A value as text: strings as they are, numbers in shortest decimal form (never exponent notation, so a large
 * wei amount stays a valid decimal), booleans `true`/`false`, `null`, objects and arrays as compact JSON.
 */
export function renderValue(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number") return renderNumber(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "bigint") return value.toString();
  if (value === null || value === undefined) return "null";
  return stringify(value);
}

function renderNumber(n: number): string {
  if (!Number.isFinite(n)) return "null";
  if (n === 0) return "0"; // -0 too
  const s = String(n);
  const e = s.indexOf("e");
  if (e < 0) return s;
  const exponent = Number(s.slice(e + 1));
  let mantissa = s.slice(0, e);
  const sign = mantissa.startsWith("-") ? "-" : "";
  if (sign) mantissa = mantissa.slice(1);
  const [whole, fraction = ""] = mantissa.split(".") as [string, string?];
  const digits = whole + fraction;
  const point = whole.length + exponent;
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return sign + digits + "0".repeat(point - digits.length);
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

export interface RenderOptions {
  /** Called with each path that resolved (for the step's `inputs`). */
  onResolved?: (path: string) => void;
  /**
   * Called with the UTF-8 size of each piece of rendered text before it is added, so the execution's state
   * budget (API.md §18.2) counts what expansion produces as it produces it: a string of `{{A.data}}` repeated
   * thousands of times stops at the budget (the charge throws) instead of building hundreds of MB first.
   */
  charge?: (bytes: number) => void;
  /** A bound of this one rendering: past it, RenderedTooLargeError, before more text is built. */
  maxBytes?: number;
}

/** A rendering passed its own `maxBytes` (RenderOptions). */
export class RenderedTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`rendered text would exceed ${maxBytes} bytes`);
    this.name = "RenderedTooLargeError";
  }
}

/** The charge of one rendering: the caller's, and its own bound. */
function renderCharge(options: RenderOptions): (bytes: number) => void {
  const { charge, maxBytes } = options;
  if (maxBytes === undefined) return charge ?? (() => {});
  let total = 0;
  return (bytes) => {
    total += bytes;
    if (total > maxBytes) throw new RenderedTooLargeError(maxBytes);
    charge?.(bytes);
  };
}

/**
 * Replaces every path template of `text` with its rendered value. `{{ … }}` that is not a path is left as it
 * is: in customCode `source` and branch/filter expressions it may be JavaScript, and templated fields have been
 * checked by the definition layer. Throws TemplateUnresolvedError on the first path that does not resolve.
 */
export function renderString(text: string, variables: Variables, options: RenderOptions = {}): string {
  if (!hasTemplate(text)) return text;
  const charge = renderCharge(options);
  let out = "";
  let last = 0;
  for (const t of findTemplates(text)) {
    if (!t.path) continue;
    const value = resolvePath(t.path, variables);
    options.onResolved?.(t.path.text);
    const piece = text.slice(last, t.start) + renderValue(value);
    charge(Buffer.byteLength(piece));
    out += piece;
    last = t.end;
  }
  const rest = text.slice(last);
  charge(Buffer.byteLength(rest));
  return out + rest;
}

/** Keys whose values are never templated (API.md §8.6). */
const UNTEMPLATED_KEYS: readonly string[] = ["contractAbi"];

export interface ConfigRenderOptions extends RenderOptions {
  /** Object keys whose values are copied without expansion; default `contractAbi`. */
  skipKeys?: readonly string[];
}

/** Renders every string value of `config` recursively (values only, never object keys; `contractAbi` skipped). */
export function renderConfig<T>(config: T, variables: Variables, options: ConfigRenderOptions = {}): T {
  const skip = new Set(options.skipKeys ?? UNTEMPLATED_KEYS);
  const walk = (value: unknown): unknown => {
    if (typeof value === "string") return renderString(value, variables, options);
    if (Array.isArray(value)) return value.map(walk);
    if (value !== null && typeof value === "object") {
      // fromEntries defines each member, so a `__proto__` key (restApi headers, §18.6) stays data.
      return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, skip.has(key) ? member : walk(member)]));
    }
    return value;
  };
  return walk(config) as T;
}

// ---------------------------------------------------------------------------------------------------------
// What a config refers to

export type ValuePath = readonly (string | number)[];

/** Calls `visit` for every string value inside `value` (not keys), with its location; skips `skipKeys`. */
export function forEachString(
  value: unknown,
  visit: (text: string, at: ValuePath) => void,
  skipKeys: readonly string[] = UNTEMPLATED_KEYS,
  at: ValuePath = [],
): void {
  if (typeof value === "string") visit(value, at);
  else if (Array.isArray(value)) value.forEach((item, i) => forEachString(item, visit, skipKeys, [...at, i]));
  else if (value !== null && typeof value === "object") {
    for (const [key, member] of Object.entries(value)) {
      if (!skipKeys.includes(key)) forEachString(member, visit, skipKeys, [...at, key]);
    }
  }
}

/** Every distinct template path used in the string values of `value` (in order of first use). */
export function referencedPaths(value: unknown, skipKeys: readonly string[] = UNTEMPLATED_KEYS): TemplatePath[] {
  const seen = new Map<string, TemplatePath>();
  forEachString(
    value,
    (text) => {
      for (const t of findTemplates(text)) if (t.path && !seen.has(t.path.text)) seen.set(t.path.text, t.path);
    },
    skipKeys,
  );
  return [...seen.values()];
}

/** The distinct roots of `paths`. */
export const referencedRoots = (paths: readonly TemplatePath[]): string[] => [...new Set(paths.map((p) => p.root))];

/**
 * The secret names that `paths` need: `secrets.NAME` and its alias `apContext.configVars.NAME` (any spelling of
 * the segment, `secrets['NAME']` included). Only these are decrypted for a step (API.md §12.5).
 */
export function referencedSecretNames(paths: readonly TemplatePath[]): string[] {
  const names = new Set<string>();
  for (const p of paths) {
    const [first, second] = p.segments;
    if (p.root === "secrets" && first) names.add(first.key);
    if (p.root === "apContext" && first?.key === "configVars" && second) names.add(second.key);
  }
  return [...names];
}
