/**
 * JSON kept as text (API.md §18.2). Parsed JSON can take 20-55 times its text in memory (a body of tiny
 * objects, `[{},{},...]`), so the engine holds what it cannot bound (HTTP response bodies, script results,
 * step outputs) as a `JsonText` and parses only the part a step needs: a template path is read out of the
 * text (`extract`), a filter's or loop's array is split into its elements' texts (`elements`), and the
 * sandbox receives variables as one JSON text spliced together from the pieces (`stringify`).
 *
 * The scanner (`checkJson`) is iterative, so no nesting depth can overflow a stack, and it allocates nothing
 * per value: it validates a text as JSON (RFC 8259), measures its nesting, and compacts it (whitespace
 * outside strings dropped); numbers and string escapes are kept as written.
 */

import { nextSlice } from "./slices";

/** A JSON value held as its (compact, valid) text. */
export class JsonText {
  constructor(readonly text: string) {}
  /** Whether the value is an object or an array (else a string, number, boolean or null). */
  get isContainer(): boolean {
    const c = this.text.charCodeAt(0);
    return c === OPEN_BRACE || c === OPEN_BRACKET;
  }
  get isArray(): boolean {
    return this.text.charCodeAt(0) === OPEN_BRACKET;
  }
  /** Correct but unbounded: the engine serializes with `stringify` below, which splices the text instead. */
  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

export type JsonCheck = { ok: true; json: JsonText; depth: number } | { ok: false };

/** Validates `text` as one JSON value and compacts it; `depth` is its deepest nesting (a scalar is 0). */
export function checkJson(text: string): JsonCheck {
  const scan = scanJson(text);
  for (;;) {
    const next = scan.next();
    if (next.done) return next.value;
  }
}

/** As checkJson, yielding to the event loop between slices, so a 10 MiB body never holds the thread for long. */
export async function checkJsonInSlices(text: string): Promise<JsonCheck> {
  const scan = scanJson(text);
  for (;;) {
    const next = scan.next();
    if (next.done) return next.value;
    await nextSlice();
  }
}

/**
 * Characters scanned between two yields, about a millisecond of work; slices take turns (./slices.ts), one per
 * turn of the event loop, so a dozen bodies scanned at once still leave the thread to a request every
 * millisecond or so (API.md §18: another owner's latency). Before, each scan yielded on its own every 256 K
 * characters (~6 ms), and a dozen such slices ran back to back in every turn.
 */
const SLICE_CHARS = 65_536;

function* scanJson(text: string): Generator<void, JsonCheck> {
  const n = text.length;
  const pieces: string[] = [];
  let runStart = -1; // start of the current run of non-whitespace characters
  let i = 0;
  let depth = 0;
  let maxDepth = 0;
  // Per open container: true for an object. Expectation: what may come next.
  const stack: boolean[] = [];
  type Expect = "value" | "valueOrClose" | "key" | "keyOrClose" | "colon" | "commaOrClose" | "end";
  let expect = "value" as Expect;

  const flush = (end: number) => {
    if (runStart >= 0) pieces.push(text.slice(runStart, end));
    runStart = -1;
  };
  const afterValue = () => {
    expect = stack.length === 0 ? "end" : "commaOrClose";
  };

  let sliceEnd = SLICE_CHARS;
  while (i < n) {
    if (i >= sliceEnd) {
      yield;
      sliceEnd = i + SLICE_CHARS;
    }
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      flush(i);
      i++;
      continue;
    }
    if (runStart < 0) runStart = i;
    switch (expect) {
      case "end":
        return { ok: false };
      case "colon":
        if (c !== COLON) return { ok: false };
        expect = "value";
        i++;
        continue;
      case "commaOrClose": {
        const inObject = stack[stack.length - 1]!;
        if (c === COMMA) {
          expect = inObject ? "key" : "value";
          i++;
          continue;
        }
        if (c === (inObject ? CLOSE_BRACE : CLOSE_BRACKET)) {
          stack.pop();
          depth--;
          i++;
          afterValue();
          continue;
        }
        return { ok: false };
      }
      case "key":
      case "keyOrClose": {
        if (c === CLOSE_BRACE && expect === "keyOrClose") {
          stack.pop();
          depth--;
          i++;
          afterValue();
          continue;
        }
        if (c !== QUOTE) return { ok: false };
        const end = skipString(text, i);
        if (end < 0) return { ok: false };
        i = end;
        expect = "colon";
        continue;
      }
      case "value":
      case "valueOrClose": {
        if (c === CLOSE_BRACKET && expect === "valueOrClose") {
          stack.pop();
          depth--;
          i++;
          afterValue();
          continue;
        }
        if (c === OPEN_BRACE || c === OPEN_BRACKET) {
          stack.push(c === OPEN_BRACE);
          if (++depth > maxDepth) maxDepth = depth;
          expect = c === OPEN_BRACE ? "keyOrClose" : "valueOrClose";
          i++;
          continue;
        }
        const end = c === QUOTE ? skipString(text, i) : skipScalar(text, i);
        if (end < 0) return { ok: false };
        i = end;
        afterValue();
        continue;
      }
    }
  }
  if (expect !== "end") return { ok: false };
  flush(n);
  return { ok: true, json: new JsonText(pieces.length === 1 ? pieces[0]! : pieces.join("")), depth: maxDepth };
}

/** End (exclusive) of the string token starting at `i` (a quote), or -1 if it is not a valid JSON string. */
function skipString(text: string, i: number): number {
  const n = text.length;
  for (let j = i + 1; j < n; j++) {
    const c = text.charCodeAt(j);
    if (c === QUOTE) return j + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const e = text.charCodeAt(++j);
      if (e === 0x75) {
        for (let k = 1; k <= 4; k++) if (!isHex(text.charCodeAt(j + k))) return -1;
        j += 4;
      } else if (!(e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74)) {
        return -1;
      }
    }
  }
  return -1;
}

/** End of the number or literal starting at `i`, or -1. */
function skipScalar(text: string, i: number): number {
  for (const literal of ["true", "false", "null"]) if (text.startsWith(literal, i)) return i + literal.length;
  let j = i;
  if (text.charCodeAt(j) === 0x2d) j++;
  if (text.charCodeAt(j) === 0x30) j++;
  else if (isDigit(text.charCodeAt(j))) while (isDigit(text.charCodeAt(j))) j++;
  else return -1;
  if (text.charCodeAt(j) === 0x2e) {
    j++;
    if (!isDigit(text.charCodeAt(j))) return -1;
    while (isDigit(text.charCodeAt(j))) j++;
  }
  const e = text.charCodeAt(j);
  if (e === 0x65 || e === 0x45) {
    j++;
    const sign = text.charCodeAt(j);
    if (sign === 0x2b || sign === 0x2d) j++;
    if (!isDigit(text.charCodeAt(j))) return -1;
    while (isDigit(text.charCodeAt(j))) j++;
  }
  return j;
}

// ---------------------------------------------------------------------------------------------------------
// Reading parts of a compact, valid text (a JsonText): no whitespace between tokens.

/** End of the value starting at `i` in compact valid JSON. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === QUOTE) return skipString(text, i);
  if (c !== OPEN_BRACE && c !== OPEN_BRACKET) return skipScalar(text, i);
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    const d = text.charCodeAt(j);
    if (d === QUOTE) j = skipString(text, j) - 1;
    else if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
    else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
      if (--depth === 0) return j + 1;
    }
  }
  return text.length;
}

/** The texts of an array's elements (for a JsonText that is an array); at most `max` + 1 of them. */
export function elements(json: JsonText, max = Infinity): JsonText[] {
  const { text } = json;
  const out: JsonText[] = [];
  let i = 1;
  if (text.charCodeAt(i) === CLOSE_BRACKET) return out;
  while (out.length <= max) {
    const end = skipValue(text, i);
    out.push(new JsonText(text.slice(i, end)));
    if (text.charCodeAt(end) !== COMMA) return out;
    i = end + 1;
  }
  return out;
}

/** The number of elements of an array text. */
export function arrayLength(json: JsonText): number {
  const { text } = json;
  if (text.charCodeAt(1) === CLOSE_BRACKET) return 0;
  let count = 1;
  for (let i = 1; ;) {
    const end = skipValue(text, i);
    if (text.charCodeAt(end) !== COMMA) return count;
    count++;
    i = end + 1;
  }
}

/** The member `key` of an object text, the element `index` of an array text, or undefined when absent. */
export function member(
  json: JsonText,
  segment: { kind: "key"; key: string } | { kind: "index"; key: string; index: number },
): JsonText | undefined {
  const { text } = json;
  const open = text.charCodeAt(0);
  if (open === OPEN_BRACKET) {
    if (segment.kind !== "index") return undefined;
    let i = 1;
    if (text.charCodeAt(i) === CLOSE_BRACKET) return undefined;
    for (let at = 0; ; at++) {
      const end = skipValue(text, i);
      if (at === segment.index) return new JsonText(text.slice(i, end));
      if (text.charCodeAt(end) !== COMMA) return undefined;
      i = end + 1;
    }
  }
  if (open !== OPEN_BRACE) return undefined;
  const wanted = segment.key;
  let found: JsonText | undefined; // a repeated key: the last one wins, as in JSON.parse
  let i = 1;
  if (text.charCodeAt(i) === CLOSE_BRACE) return undefined;
  for (;;) {
    const keyEnd = skipString(text, i);
    const raw = text.slice(i + 1, keyEnd - 1);
    const key = raw.includes("\\") ? (JSON.parse(text.slice(i, keyEnd)) as string) : raw;
    const valueEnd = skipValue(text, keyEnd + 1);
    if (key === wanted) found = new JsonText(text.slice(keyEnd + 1, valueEnd));
    if (text.charCodeAt(valueEnd) !== COMMA) return found;
    i = valueEnd + 1;
  }
}

/** The value itself (parsed): for the parts a step reads, never a whole large output. */
export const parse = (json: JsonText): unknown => JSON.parse(json.text);

/** A value's JSON, with every JsonText inside spliced in as it is (BigInt as its decimal string). */
export function stringify(value: unknown): string {
  if (value instanceof JsonText) return value.text;
  if (!containsText(value)) return JSON.stringify(value, bigints) ?? "null";
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined || typeof v === "function" || typeof v === "symbol" ? "null" : stringify(v))).join(",")}]`;
  const parts: string[] = [];
  for (const [key, member] of Object.entries(value as object)) {
    if (member === undefined || typeof member === "function" || typeof member === "symbol") continue;
    parts.push(`${JSON.stringify(key)}:${stringify(member)}`);
  }
  return `{${parts.join(",")}}`;
}

/** The value with every JsonText inside parsed (for what must be a plain value: a recorded output under its cap). */
export function materialize(value: unknown): unknown {
  if (value instanceof JsonText) return parse(value);
  if (!containsText(value)) return value;
  if (Array.isArray(value)) return value.map(materialize);
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value as object))
    Object.defineProperty(out, key, { value: materialize(member), enumerable: true, writable: true, configurable: true });
  return out;
}

const bigints = (_key: string, v: unknown) => (typeof v === "bigint" ? v.toString() : v);

/** Whether a JsonText sits anywhere inside (only the engine's own containers are walked: outputs are shallow). */
function containsText(value: unknown, depth = 0): boolean {
  if (value instanceof JsonText) return true;
  if (value === null || typeof value !== "object" || depth > 4) return false;
  if (Array.isArray(value)) return value.some((v) => containsText(v, depth + 1));
  for (const member of Object.values(value)) if (containsText(member, depth + 1)) return true;
  return false;
}
