/**
 * Request parsing shared by every endpoint: JSON bodies (415/413/INVALID_JSON, API.md §1.3) and
 * valibot validation whose issues become FieldErrors naming the failing field (`body.salt`, `query.limit`).
 */
import * as v from "valibot";
import type { Context } from "hono";
import { ApiError, ClientGone, validationFailed, type FieldError } from "../errors";
import { useConfig } from "../current-runtime";
import { asInteger } from "./endpoint";

export type Location = "body" | "query" | "path" | "header";

export function fieldErrors(issues: readonly v.BaseIssue<unknown>[], location: Location): FieldError[] {
  return issues.map((issue) => {
    let path: string = location;
    for (const item of issue.path ?? []) {
      const key = (item as { key: unknown }).key;
      path += typeof key === "number" ? `[${key}]` : `.${String(key)}`;
    }
    return { path, message: issue.message };
  });
}

/** Validates `input` against `schema`; on failure throws 400 with every problem found. */
export function parse<S extends v.GenericSchema>(schema: S, input: unknown, location: Location, code?: string): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (!result.success) throw validationFailed(fieldErrors(result.issues, location), code);
  return result.output;
}

/** Reads a JSON object body: an empty body reads as {}; `null` members are dropped (treated as absent). */
export async function readJsonBody(c: Context): Promise<Record<string, unknown>> {
  const raw = await readBodyWithin(c.req.raw, useConfig().limits.maxBodyBytes);
  if (raw.byteLength === 0) return {};
  const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json") {
    throw new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "The request body must be sent as application/json.");
  }
  let text: string;
  let value: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    value = JSON.parse(text);
  } catch {
    throw new ApiError(400, "INVALID_JSON", "The request body is not valid JSON.");
  }
  if (nestingDepth(text) > MAX_BODY_DEPTH) {
    throw validationFailed([{ path: "body", message: `is nested more than ${MAX_BODY_DEPTH} levels deep` }]);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ApiError(400, "INVALID_JSON", "The request body must be a JSON object.");
  }
  return dropNulls(value as Record<string, unknown>);
}

/**
 * Deepest nesting of objects and arrays a body may have, the body itself counted as level 1. Free-form JSON is
 * stored as JSON text (workflow documents, watch entries, execution records), so DynamoDB's own limit of 32
 * levels never applies; this bound keeps every recursive walk of a value (validation, canonical JSON,
 * templates, redaction, JSON.stringify itself, which overflows the stack a few thousand levels down) far from
 * the stack's end. It is the depth API.md §18.2 allows a response body, so inputs and outputs share one bound.
 * Counted on the text before anything walks the parsed value (JSON.parse itself does not recurse).
 */
const MAX_BODY_DEPTH = 512;

/** Nesting depth of valid JSON text, counted on the text (strings skipped), without recursion. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) deepest = Math.max(deepest, ++depth);
    else if (ch === 0x7d || ch === 0x5d) depth--;
  }
  return deepest;
}

/**
 * The body, read chunk by chunk and refused (413) as soon as it passes `limit` bytes: a chunked upload with
 * no Content-Length never sits in memory beyond the limit. The 413 closes the connection, so the client
 * stops sending (API.md §1.3). A body cut off by the client is ClientGone, not an error of ours.
 */
async function readBodyWithin(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read().catch(() => {
      // The only way a request body fails is its connection ending early: the client dropped the upload.
      throw new ClientGone("the request body was cut off");
    });
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  // Shorter than it said it would be: the connection ended before the body did.
  if (size < declared) throw new ClientGone("the request body was cut off");
  return Buffer.concat(chunks, size);
}

const tooLarge = (limit: number) =>
  new ApiError(413, "PAYLOAD_TOO_LARGE", `The request body is larger than ${limit} bytes.`, { headers: { Connection: "close" } });

/** Optional top-level members sent as null count as absent (API.md §1.3). */
function dropNulls(body: Record<string, unknown>) {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null));
}

/** Reusable scalar schemas of API.md §1.5. */
export const Uint256String = v.pipe(
  v.string(),
  v.regex(/^(0|[1-9][0-9]*)$/, "must be a canonical decimal integer"),
  // regex issues do not stop the pipe, so the range check guards itself
  v.check((s) => !/^(0|[1-9][0-9]*)$/.test(s) || (s.length <= 78 && BigInt(s) < 2n ** 256n), "must be at most 2^256 - 1"),
  v.metadata({ maxLength: 78 }), // documents the length the range check implies
);
/** A ULID in either letter case, upper-cased (the case-insensitive pattern comes first so the document shows it). */
export const UlidString = v.pipe(
  v.string("must be a ULID"),
  v.regex(/^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$/, "must be a ULID"),
  v.transform((s) => s.toUpperCase()),
);
export const BooleanQuery = v.picklist(["true", "false"], "must be true or false");
/**
 * A chain id in a body: an integer from 0 to 2^53 - 1 (API.md §1.3); 0 means absent. The query form below
 * accepts exactly the same values, so a value gets the same answer wherever it is given (an unconfigured
 * chain is UNSUPPORTED_CHAIN in both, an out-of-range one VALIDATION_FAILED in both).
 */
export const ChainIdNumber = v.pipe(
  v.number("must be an integer"),
  v.integer("must be an integer"),
  v.minValue(0, "must not be negative"),
  v.maxValue(Number.MAX_SAFE_INTEGER, "must be at most 2^53 - 1"),
);
export const ChainIdQuery = v.pipe(
  v.string(),
  v.regex(/^\d+$/, "must be an integer"),
  v.transform(Number),
  v.maxValue(Number.MAX_SAFE_INTEGER, "must be at most 2^53 - 1"),
  asInteger(0, Number.MAX_SAFE_INTEGER),
);
