/**
 * Secret redaction (API.md §10.2): before a step is recorded or exposed, every occurrence of a resolved secret
 * value in the output's string values, the log and the error becomes `***`. Values shorter than 4 bytes are
 * replaced only where a whole string equals them (a 2-byte secret inside every word would destroy the
 * record and tell a reader where it occurs anyway).
 */
import { LOG_TRUNCATED_MARKER } from "./sandbox";

export const REDACTED = "***";
const SHORT_BYTES = 4;

export interface Redactor {
  /** A string with every secret replaced. */
  text(value: string): string;
  /** A JSON value with every string value redacted (keys are kept). */
  value<T>(value: T): T;
  /**
   * A log that may have been cut by the log limit: redacted, and when it ends with the truncation marker, a
   * trailing piece that is the beginning of a secret (cut in the middle) is replaced too.
   */
  log(value: string): string;
}

export function createRedactor(secretValues: Iterable<string>): Redactor {
  const values = [...new Set(secretValues)].filter((s) => s.length > 0);
  // Longest first, so a secret that contains another is replaced whole.
  const long = values.filter((s) => Buffer.byteLength(s) >= SHORT_BYTES).sort((a, b) => b.length - a.length);
  const short = new Set(values.filter((s) => Buffer.byteLength(s) < SHORT_BYTES));

  const text = (value: string): string => {
    if (short.has(value)) return REDACTED;
    let out = value;
    for (const secret of long) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  };

  const walk = (value: unknown): unknown => {
    if (typeof value === "string") return text(value);
    if (Array.isArray(value)) return value.map(walk);
    if (value !== null && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [key, member] of Object.entries(value)) out[key] = walk(member);
      return out;
    }
    return value;
  };

  const log = (value: string): string => {
    const redacted = text(value);
    if (!redacted.endsWith(LOG_TRUNCATED_MARKER)) return redacted;
    const body = redacted.slice(0, -LOG_TRUNCATED_MARKER.length);
    let cut = 0;
    for (const secret of long) {
      // The longest proper prefix of the secret that the kept text ends with.
      for (let n = Math.min(secret.length - 1, body.length); n > cut; n--) {
        if (body.endsWith(secret.slice(0, n))) {
          cut = n;
          break;
        }
      }
    }
    return cut > 0 ? body.slice(0, body.length - cut) + REDACTED + LOG_TRUNCATED_MARKER : redacted;
  };

  return { text, value: <T>(value: T) => walk(value) as T, log };
}
