/**
 * Secret redaction (API.md §10.2, §18.3): before a step is recorded or exposed, every occurrence of a resolved
 * secret value in the output (its string values and its object keys), the log and the error becomes `***`.
 *
 * A secret of at least 4 bytes is looked for in each of these forms (each computed once per redactor):
 *
 *   - the value itself;
 *   - its JSON-string-escaped form, the inside of `JSON.stringify(value)` (`a"b` → `a\"b`);
 *   - its percent-encoded form, `encodeURIComponent(value)`, and the same with lower-case hex digits;
 *   - its base64 form (of the UTF-8 bytes), standard and URL-safe alphabets, with and without padding;
 *   - the part of its base64 form that survives inside a longer base64 text (an echoed `Basic` authorization
 *     header, `base64("user:" + secret)`). Base64 turns each 3 bytes into 4 characters of 6 bits, so where
 *     the secret starts at byte offset o of the longer text, the characters carrying its bits depend on
 *     o mod 3 and, at the two edges, partly on the neighbouring bytes. Only the characters whose 6 bits all
 *     come from the secret are the same wherever it sits; those are what is replaced. For o mod 3 = r they
 *     are characters [start, end) of base64(r zero bytes + secret) with start = 0, 2, 3 for r = 0, 1, 2 and
 *     end = floor(8 (r + n) / 6) for an n-byte secret. The (at most two) edge characters that mix secret bits
 *     with a neighbour's are left: they carry at most 4 bits of the secret each, and replacing them would
 *     mean guessing where the neighbouring text begins.
 *
 * Values shorter than 4 bytes are replaced only where a whole string equals them (a 2-byte secret inside
 * every word would destroy the record and tell a reader where it occurs anyway), and only in their raw form.
 *
 * Overlapping occurrences (of one form, or of two secrets) are merged and replaced by one `***`, so no piece
 * of either survives between them. It is one pass over the original text, linear in its length (API.md §18:
 * redaction runs on a shared thread): every occurrence of every form is found in the original, the spans are
 * merged, and the output is built left to right. An inserted `***` can complete a form only when that form
 * contains `*` (a secret containing `*`: `***x` around `***` + `x`), and only together with text at most one
 * form's length around it; so after each span only the forms containing `*` are looked for in that window,
 * and a hit widens the span over what it matched (kept characters, or a neighbouring `***`) and looks again.
 * Each widening consumes original characters or a span, so the work stays linear; "repeat until nothing
 * changes" was quadratic for such secrets (each pass made the next match).
 *
 * Object keys are redacted like string values. Two keys of one object may then come out as the same text
 * (`{"<secret>": 1, "<base64 of secret>": 2}` both give `***`); no entry is dropped for that. The rule:
 * keys that redaction leaves unchanged keep their names; the redacted keys then take their redacted text in
 * the object's key order, and one whose text is already taken gets the first free `<text> (2)`,
 * `<text> (3)`... (itself redacted, should that suffix complete a secret). So every entry survives, a key
 * that holds no secret is never renamed, and the numbering tells a reader that several keys collapsed.
 */
import { LOG_TRUNCATED_MARKER } from "../sandbox/log-marker";

export const REDACTED = "***";
const SHORT_BYTES = 4;

export interface Redactor {
  /** A string with every secret (in every form above) replaced. */
  text(value: string): string;
  /** A JSON value with every string value and every object key redacted (colliding keys numbered). */
  value<T>(value: T): T;
  /**
   * A log that may have been cut by the log limit: redacted, and when it ends with the truncation marker, a
   * trailing piece that is the beginning of a secret's form (cut in the middle) is replaced too.
   */
  log(value: string): string;
  /** As `text`, `value` and `log`, in slices that yield to the event loop: for text whose size has no small bound. */
  inSlices: {
    text(value: string): Promise<string>;
    value<T>(value: T): Promise<T>;
    log(value: string): Promise<string>;
  };
}

/**
 * Redaction as steps: each `yield` reports work done (characters scanned), so a caller on a shared thread can
 * pause between slices (`inSlices`) and a plain caller runs it through (`drain`).
 */
type Steps<T> = Generator<number, T, void>;

const SLICE_WORK = 262_144;

function drain<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

async function drainInSlices<T>(steps: Steps<T>): Promise<T> {
  let work = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    work += next.value;
    if (work >= SLICE_WORK) {
      work = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

/** Every form of a secret of at least 4 bytes that is looked for (duplicates removed by the caller). */
export function secretForms(secret: string): string[] {
  const forms = [secret];
  const json = JSON.stringify(secret).slice(1, -1);
  forms.push(json);
  try {
    const percent = encodeURIComponent(secret);
    forms.push(
      percent,
      percent.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
    );
  } catch {
    // A lone surrogate has no percent-encoded form (encodeURIComponent throws), so nothing can echo one.
  }
  const bytes = Buffer.from(secret, "utf8");
  const base64: string[] = [];
  const padded = bytes.toString("base64");
  base64.push(padded, padded.replace(/=+$/, ""));
  for (const r of [0, 1, 2]) {
    const shifted = r === 0 ? padded : Buffer.concat([Buffer.alloc(r), bytes]).toString("base64");
    base64.push(shifted.slice([0, 2, 3][r], Math.floor((8 * (r + bytes.length)) / 6)));
  }
  for (const form of base64) forms.push(form, form.replace(/\+/g, "-").replace(/\//g, "_"));
  return forms;
}

export function createRedactor(secretValues: Iterable<string>): Redactor {
  const values = [...new Set(secretValues)].filter((s) => typeof s === "string" && s.length > 0);
  const short = new Set(values.filter((s) => Buffer.byteLength(s) < SHORT_BYTES));
  // Every form of every long secret, once, longest first (the log rule prefers the longest cut piece).
  const forms = [...new Set(values.filter((s) => Buffer.byteLength(s) >= SHORT_BYTES).flatMap(secretForms))]
    .filter((f) => f.length > 0)
    .sort((a, b) => b.length - a.length);
  const shortestForm = forms.at(-1)?.length ?? Infinity;
  // Only a form containing `*` can be completed by an inserted `***`.
  const starForms = forms.filter((f) => f.includes("*"));

  function* textSteps(value: string): Steps<string> {
    if (short.has(value)) return REDACTED;
    if (value.length < shortestForm) return value;
    return yield* redactOnce(value, forms, starForms);
  }

  const put = (out: Record<string, unknown>, key: string, member: unknown) => {
    // A `__proto__` key is data (§18.6): assigning it would set the prototype and lose the entry.
    if (key === "__proto__") Object.defineProperty(out, key, { value: member, enumerable: true, writable: true, configurable: true });
    else out[key] = member;
  };

  function* walk(value: unknown): Steps<unknown> {
    if (typeof value === "string") return yield* textSteps(value);
    if (Array.isArray(value)) {
      const out: unknown[] = [];
      for (const item of value) out.push(yield* walk(item));
      return out;
    }
    if (value === null || typeof value !== "object") return value;
    const entries = Object.entries(value);
    const keys: string[] = [];
    for (const [key] of entries) keys.push(yield* textSteps(key));
    const names = keys.every((k, i) => k === entries[i]![0]) ? keys : yield* numbered(entries, keys);
    const out: Record<string, unknown> = {};
    for (let i = 0; i < entries.length; i++) put(out, names[i]!, yield* walk(entries[i]![1]));
    return out;
  }

  /** Some key held a secret: unchanged keys keep their names, redacted ones are numbered on collision. */
  function* numbered(entries: [string, unknown][], keys: string[]): Steps<string[]> {
    const taken = new Set(entries.filter(([key], i) => keys[i] === key).map(([key]) => key));
    const names: string[] = [];
    for (let i = 0; i < entries.length; i++) {
      const key = entries[i]![0];
      let name = keys[i]!;
      if (name !== key) {
        for (let n = 2; taken.has(name); n++) name = yield* textSteps(`${keys[i]} (${n})`);
        taken.add(name);
      }
      names.push(name);
    }
    return names;
  }

  function* logSteps(value: string): Steps<string> {
    const redacted = yield* textSteps(value);
    if (!redacted.endsWith(LOG_TRUNCATED_MARKER)) return redacted;
    const body = redacted.slice(0, -LOG_TRUNCATED_MARKER.length);
    let cut = 0;
    for (const form of forms) {
      // The longest proper prefix of the form that the kept text ends with.
      for (let n = Math.min(form.length - 1, body.length); n > cut; n--) {
        if (body.endsWith(form.slice(0, n))) {
          cut = n;
          break;
        }
      }
      yield form.length;
    }
    return cut > 0 ? body.slice(0, body.length - cut) + REDACTED + LOG_TRUNCATED_MARKER : redacted;
  }

  return {
    text: (value) => drain(textSteps(value)),
    value: <T>(value: T) => drain(walk(value)) as T,
    log: (value) => drain(logSteps(value)),
    inSlices: {
      text: (value) => drainInSlices(textSteps(value)),
      value: async <T>(value: T) => (await drainInSlices(walk(value))) as T,
      log: (value) => drainInSlices(logSteps(value)),
    },
  };
}

/** A replaced stretch `[from, to)` of the original (`***` in the output) or a kept one. */
interface Piece {
  from: number;
  to: number;
  masked: boolean;
}

const pieceLength = (p: Piece) => (p.masked ? REDACTED.length : p.to - p.from);

/** Every occurrence of every form in `value`, overlapping ones merged, in order. */
function* occurrences(value: string, forms: readonly string[]): Steps<[number, number][]> {
  const spans: [number, number][] = [];
  for (const form of forms) {
    for (let at = value.indexOf(form); at !== -1; at = value.indexOf(form, at + 1)) {
      spans.push([at, at + form.length]);
      yield form.length;
    }
    yield value.length;
  }
  spans.sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const [s, e] of spans) {
    const last = merged.at(-1);
    if (last && s < last[1]) last[1] = Math.max(last[1], e);
    else merged.push([s, e]);
  }
  return merged;
}

/** The last `n` characters of the output built so far. */
function tailOf(pieces: readonly Piece[], value: string, n: number): string {
  let out = "";
  for (let i = pieces.length - 1; i >= 0 && out.length < n; i--) {
    const p = pieces[i]!;
    out = (p.masked ? REDACTED : value.slice(Math.max(p.from, p.to - (n - out.length)), p.to)) + out;
  }
  return out.slice(-n);
}

/** Takes the last `n` output characters back off `pieces`; answers where the span now starts in the original. */
function retract(pieces: Piece[], n: number, start: number): number {
  while (n > 0) {
    const p = pieces.pop()!;
    const length = pieceLength(p);
    if (!p.masked && length > n) {
      p.to -= n;
      pieces.push(p);
      return p.to;
    }
    n -= length;
    start = p.from;
  }
  return start;
}

/** The first occurrence of a form in `window` that covers one of the characters [at, at + 3) (the `***`). */
function across(window: string, at: number, forms: readonly string[]): [number, number] | undefined {
  for (const form of forms) {
    const from = Math.max(0, at - form.length + 1);
    const found = window.indexOf(form, from);
    if (found !== -1 && found < at + REDACTED.length) return [found, found + form.length];
  }
  return undefined;
}

/** `value` with every form replaced, in one pass that no inserted `***` can undo (see the header). */
function* redactOnce(value: string, forms: readonly string[], starForms: readonly string[]): Steps<string> {
  const spans = yield* occurrences(value, forms);
  if (spans.length === 0) return value;
  const reach = Math.max(0, ...starForms.map((f) => f.length - 1));
  const pieces: Piece[] = [];
  let done = 0;
  for (let i = 0; i < spans.length;) {
    let [start, end] = spans[i++]!;
    if (start > done) pieces.push({ from: done, to: start, masked: false });
    for (;;) {
      if (reach === 0) break;
      const next = i < spans.length ? spans[i]![0] : value.length;
      const tail = tailOf(pieces, value, reach);
      const hit = across(tail + REDACTED + value.slice(end, Math.min(end + reach, next)), tail.length, starForms);
      yield 3 * reach * starForms.length;
      if (!hit) break;
      end += Math.max(0, hit[1] - tail.length - REDACTED.length);
      if (hit[0] < tail.length) start = retract(pieces, tail.length - hit[0], start);
    }
    pieces.push({ from: start, to: end, masked: true });
    yield end - done;
    done = end;
  }
  if (done < value.length) pieces.push({ from: done, to: value.length, masked: false });
  return pieces.map((p) => (p.masked ? REDACTED : value.slice(p.from, p.to))).join("");
}
