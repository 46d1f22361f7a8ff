/**
 * The outbound response's body and headers (shared/outbound/client.ts): read within the size limit, decoded
 * (gzip, deflate, br), then parsed as JSON when it is JSON, else text in its charset.
 */
import { isAscii } from "node:buffer";
import type { ClientRequest, IncomingMessage } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { TextDecoder } from "node:util";
import zlib from "node:zlib";
import { checkJsonInSlices } from "../json-text";
import { nextSlice } from "../slices";
import { MAX_RESPONSE_DEPTH, OutboundError, refusable, type Method } from "./types";

/** The decoded body, aborting the connection as soon as it exceeds `max` bytes. */
export async function readBody(
  req: ClientRequest,
  res: IncomingMessage,
  method: Method,
  max: number,
  signal: AbortSignal,
): Promise<Buffer> {
  const status = res.statusCode ?? 0;
  if (method === "HEAD" || status === 204 || status === 304) {
    req.destroy();
    return Buffer.alloc(0);
  }
  const tooLarge = () => new OutboundError("RESPONSE_TOO_LARGE", `response body larger than ${max} bytes`);
  const declared = Number(res.headers["content-length"]);
  if (Number.isFinite(declared) && declared > max) {
    req.destroy();
    throw tooLarge();
  }
  const limit = () => {
    let seen = 0;
    return new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        seen += chunk.length;
        callback(seen > max ? tooLarge() : null, chunk);
      },
    });
  };
  const decoder = decoderFor(res.headers["content-encoding"]);
  const chunks: Buffer[] = [];
  const sink = async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) chunks.push(chunk);
  };
  try {
    if (decoder) await pipeline(res, limit(), decoder, limit(), sink, { signal });
    else await pipeline(res, limit(), sink, { signal });
  } catch (err) {
    req.destroy();
    if (err instanceof OutboundError || signal.aborted) throw err;
    if (decoder && (err as { code?: string }).code?.startsWith("Z_")) {
      throw new OutboundError("NETWORK_ERROR", `could not decode the ${res.headers["content-encoding"]} response body`);
    }
    throw err;
  }
  return Buffer.concat(chunks);
}

function decoderFor(encoding: string | undefined): Transform | undefined {
  // Lenient flushing as browsers and undici do: a body cut short at the end still decodes what arrived.
  const flush = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
  switch (encoding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip(flush);
    case "deflate":
      return zlib.createInflate(flush);
    case "br":
      return zlib.createBrotliDecompress({
        flush: zlib.constants.BROTLI_OPERATION_FLUSH,
        finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
      });
    default:
      return undefined;
  }
}

/**
 * Response headers by lowercased name, repeated ones joined with ", ". Read from the raw pairs and defined as
 * members: a header named `__proto__` is data like any other (§18.6; Node's own `headers` object drops it).
 */
export function responseHeaders(res: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = Object.prototype.hasOwnProperty.call(out, name) ? `${out[name]}, ${raw[i + 1]}` : raw[i + 1]!;
    Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Encodings in which ASCII bytes are the same characters (what TextDecoder names them). */
const ASCII_COMPATIBLE = new Set(["utf-8", "windows-1252", "iso-8859-2", "iso-8859-15"]);

/** Bytes decoded between two yields (a 10 MiB body decoded at once held the thread for ~20 ms). */
const DECODE_SLICE_BYTES = 262_144;

/**
 * The body's text: ASCII (most JSON) copied at once (a memory copy, ~1 ms for 10 MiB), else decoded a slice at a
 * time with turns between (./slices.ts; a character split between slices is carried over by `stream`).
 */
async function decodeInSlices(decoder: TextDecoder, raw: Buffer): Promise<string> {
  if (raw.length <= DECODE_SLICE_BYTES) return decoder.decode(raw);
  if (isAscii(raw) && ASCII_COMPATIBLE.has(decoder.encoding)) return raw.toString("latin1");
  let text = "";
  for (let at = 0; at < raw.length; at += DECODE_SLICE_BYTES) {
    text += decoder.decode(raw.subarray(at, at + DECODE_SLICE_BYTES), { stream: true });
    await nextSlice();
  }
  return text + decoder.decode();
}

/** JSON when the body parses as JSON (whatever the Content-Type claims), else the text in its charset. */
export async function parseData(raw: Buffer, contentType: string | undefined, beforeParse?: (bytes: number) => void): Promise<unknown> {
  const charset = /;\s*charset="?([^";\s]+)/i.exec(contentType ?? "")?.[1];
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset ?? "utf-8");
  } catch {
    decoder = new TextDecoder("utf-8");
  }
  const text = await decodeInSlices(decoder, raw);
  refusable(() => beforeParse?.(raw.length));
  if (text.trim() === "") return text;
  // Held as text, never parsed whole here (§18.2): a body of tiny objects would expand many times over.
  const checked = await checkJsonInSlices(text);
  if (!checked.ok) return text;
  if (checked.depth > MAX_RESPONSE_DEPTH)
    throw new OutboundError("INVALID_RESPONSE", `response JSON nested deeper than ${MAX_RESPONSE_DEPTH} levels`);
  return checked.json.isContainer ? checked.json : JSON.parse(checked.json.text);
}
