/**
 * The outbound HTTP client of the restApi and graphqlQuery nodes (API.md §8.4.4, §8.4.5, limits §4.1).
 *
 * Workflow authors choose the URL, so every request is a potential server-side request forgery. Unless the
 * deployment sets `allow_private_network`, a destination is refused (step error `DESTINATION_NOT_ALLOWED`)
 * when its host name is a metadata or localhost name, or when ANY address it resolves to is loopback,
 * private, link-local, unique-local, metadata, multicast or reserved (shared/engine/ip.ts). The check and the
 * connection cannot disagree (DNS rebinding): the host is resolved once per hop, its addresses are checked,
 * and the socket's `lookup` is pinned to exactly those addresses, so Node never asks DNS again. Redirects
 * are followed by hand (at most 5), each hop checked the same way.
 *
 * Node's own http/https modules, not `fetch`: fetch has no per-request DNS hook without undici's Agent, and
 * its automatic redirects would connect to unchecked hops.
 *
 * Errors are `OutboundError`s carrying a step errorCode of API.md §10.2. Their messages name the host at
 * most, never the path, query, headers or body, which may hold secret values; nothing here logs.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { TextDecoder } from "node:util";
import zlib from "node:zlib";
import { addressRefusal, hostnameRefusal } from "./ip";
import { checkJsonInSlices } from "../json-text";

export const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;
export type Method = (typeof METHODS)[number];

export const MAX_REDIRECTS = 5;

export interface OutboundRequest {
  /** `http` or `https` URL, templates already expanded. */
  url: string;
  /** Any case; GET when omitted. */
  method?: string;
  headers?: Record<string, string>;
  /** Not allowed with GET or HEAD. Sent as `application/json` unless `headers` sets a Content-Type. */
  body?: string;
  /**
   * Names (any case) of `headers` that carry a secret (API.md §18.3): dropped, like the credential headers,
   * when a redirect leaves the origin. The caller knows which values came from secrets; this client does not.
   */
  sensitiveHeaders?: readonly string[];
}

/** The restApi step output `X` (API.md §8.4.5). */
export interface OutboundResponse {
  status: number;
  statusText: string;
  /** After redirects. */
  url: string;
  /** Names lowercased; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The body parsed as JSON when it is JSON, else its text ("" when there is none). */
  data: unknown;
}

/** Resolves a host name to all its addresses, like `dns.lookup(name, { all: true })`. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export interface GuardOptions {
  /** Whole request, all hops: DNS, connect, headers and body (`http_node_timeout_ms`). */
  timeoutMs: number;
  /** Decoded body bytes (`http_node_max_response_bytes`). */
  maxResponseBytes: number;
  /** `allow_private_network`: skip the destination checks (schemes are still checked). */
  allowPrivateNetwork: boolean;
  /** Tests only: replaces the system resolver. */
  resolve?: Resolver;
  /** Tests only: replaces the address classification of ./ip.ts (reason refused, or undefined). */
  addressRefusal?: (address: string) => string | undefined;
  /** Cancels the request (the execution was cancelled); reported as NETWORK_ERROR with the signal's reason. */
  signal?: AbortSignal;
  /** Called before each request is sent, redirects included: throws to refuse it (the execution's request budget, §18.3). */
  beforeSend?: () => void;
  /**
   * Called with the decoded size of a body before it is checked as JSON: throws to refuse it (the execution's
   * state budget, §18.2).
   */
  beforeParse?: (bytes: number) => void;
}

/** Step errorCodes (API.md §10.2) this client fails with. */
export type OutboundErrorCode = "INVALID_INPUT" | "NETWORK_ERROR" | "DESTINATION_NOT_ALLOWED" | "RESPONSE_TOO_LARGE" | "INVALID_RESPONSE" | "HTTP_BUDGET_EXCEEDED";

/** JSON nested deeper than this fails the step (API.md §18.2). */
export const MAX_RESPONSE_DEPTH = 512;

export class OutboundError extends Error {
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "OutboundError";
  }
}

/**
 * Fetch's "bad ports" (fetch.spec.whatwg.org): ports of protocols that an HTTP request could be smuggled
 * into (SMTP, IRC...). Refused like private addresses.
 */
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
  111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
  540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061,
  6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** Request headers the client sets itself: framing, connection management, the host and the encodings. */
const CLIENT_HEADERS = new Set([
  "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "upgrade", "te",
  "trailer", "expect", "accept-encoding",
]);
/**
 * Dropped when a redirect leaves the origin (scheme, host or port; API.md §18.3): fetch drops Authorization,
 * cookies and proxy credentials are credentials too. The request's `sensitiveHeaders` are dropped with them.
 */
const CREDENTIAL_HEADERS = ["authorization", "proxy-authorization", "cookie"];
/** Dropped with the body when a redirect turns the request into a GET. */
const BODY_HEADERS = ["content-type", "content-encoding", "content-language", "content-location"];

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const defaultResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * Sends one request the way restApi and graphqlQuery do, following redirects, within the time and size
 * limits, to allowed destinations only. Resolves with the response whatever its status (the node decides
 * what a 4xx or 5xx means); rejects with an OutboundError.
 */
export async function fetchGuarded(request: OutboundRequest, options: GuardOptions): Promise<OutboundResponse> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([deadline.signal, options.signal]) : deadline.signal;
  const current = { host: "" };
  try {
    return await run(request, options, signal, current);
  } catch (err) {
    if (err instanceof OutboundError) throw err;
    if (err instanceof Refused) throw err.reason;
    // A cut-off (a simulation at its cap) is reported with its own reason.
    if (options.signal?.aborted && !deadline.signal.aborted && options.signal.reason instanceof Error) throw new OutboundError("NETWORK_ERROR", options.signal.reason.message);
    const to = current.host ? ` to ${current.host}` : "";
    if (deadline.signal.aborted) throw new OutboundError("NETWORK_ERROR", `request${to} timed out after ${options.timeoutMs} ms`);
    if (signal.aborted) throw new OutboundError("NETWORK_ERROR", `request${to} cancelled`);
    throw new OutboundError("NETWORK_ERROR", `request to ${current.host} failed: ${describe(err)}`);
  } finally {
    clearTimeout(timer);
  }
}

async function run(
  request: OutboundRequest,
  options: GuardOptions,
  signal: AbortSignal,
  current: { host: string },
): Promise<OutboundResponse> {
  let url = parseUrl(request.url);
  let method = parseMethod(request.method);
  let headers = parseHeaders(request.headers);
  let body = request.body;
  if (body !== undefined && (method === "GET" || method === "HEAD")) {
    throw new OutboundError("INVALID_INPUT", `a body is not allowed with ${method}`);
  }
  if (body !== undefined && !headers["content-type"]) headers["content-type"] = "application/json";
  const crossOriginDropped = [...CREDENTIAL_HEADERS, ...(request.sensitiveHeaders ?? []).map((name) => name.toLowerCase())];

  for (let redirects = 0; ; redirects++) {
    current.host = url.host;
    const addresses = await destination(url, options, signal);
    refusable(options.beforeSend);
    const { req, res } = await send(url, method, headers, body, addresses, signal);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (![301, 302, 303, 307, 308].includes(status) || location === undefined) {
      const raw = await readBody(req, res, method, options.maxResponseBytes, signal);
      return {
        status,
        statusText: res.statusMessage || http.STATUS_CODES[status] || "",
        url: url.href,
        headers: responseHeaders(res),
        data: await parseData(raw, res.headers["content-type"], options.beforeParse),
      };
    }
    req.destroy();
    if (redirects === MAX_REDIRECTS) {
      throw new OutboundError("NETWORK_ERROR", `too many redirects (more than ${MAX_REDIRECTS})`);
    }
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw new OutboundError("NETWORK_ERROR", `redirect from ${url.host} to an invalid URL`);
    }
    if (next.protocol !== "http:" && next.protocol !== "https:") {
      throw new OutboundError("DESTINATION_NOT_ALLOWED", `redirect to a ${next.protocol.slice(0, -1)} URL is not allowed`);
    }
    next.username = "";
    next.password = "";
    // Browsers' rewrite (fetch §4.4): 303 makes anything but HEAD a GET, 301/302 make POST a GET.
    if ((status === 303 && method !== "HEAD") || ((status === 301 || status === 302) && method === "POST")) {
      method = "GET";
      body = undefined;
      headers = without(headers, BODY_HEADERS);
    }
    if (next.origin !== url.origin) headers = without(headers, crossOriginDropped);
    url = next;
  }
}

function parseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError("INVALID_INPUT", "url is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OutboundError("INVALID_INPUT", "url must be an http or https URL");
  }
  if (url.username || url.password) {
    throw new OutboundError("INVALID_INPUT", "url must not contain credentials; send an Authorization header instead");
  }
  return url;
}

function parseMethod(text = "GET"): Method {
  const method = text.toUpperCase();
  if (!(METHODS as readonly string[]).includes(method)) {
    throw new OutboundError("INVALID_INPUT", `method must be one of ${METHODS.join(", ")}`);
  }
  return method as Method;
}

function parseHeaders(input: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {
    accept: "*/*",
    "user-agent": "workflow-automation",
  };
  for (const [name, value] of Object.entries(input)) {
    // The name is the author's config key, never a template, so it may appear in the message; the value may not.
    if (!TOKEN.test(name)) throw new OutboundError("INVALID_INPUT", `header name ${JSON.stringify(name.slice(0, 64))} is not valid`);
    if (typeof value !== "string" || !HEADER_VALUE.test(value)) {
      throw new OutboundError("INVALID_INPUT", `header ${name} has a value that is not allowed in HTTP headers`);
    }
    const key = name.toLowerCase();
    // Defined, not assigned: `__proto__` is a valid header name and data like any other (API.md §18.6).
    if (!CLIENT_HEADERS.has(key)) Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  out["accept-encoding"] = "gzip, deflate, br";
  return out;
}

function without(headers: Record<string, string>, names: string[]): Record<string, string> {
  const out = { ...headers };
  for (const name of names) delete out[name];
  return out;
}

/** The checked addresses to connect to for this URL; throws DESTINATION_NOT_ALLOWED or NETWORK_ERROR. */
async function destination(url: URL, options: GuardOptions, signal: AbortSignal): Promise<LookupAddress[]> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const refuse = (why: string) => new OutboundError("DESTINATION_NOT_ALLOWED", `destination not allowed: ${why}`);
  const check = options.allowPrivateNetwork ? undefined : (options.addressRefusal ?? addressRefusal);
  if (check) {
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    if (BAD_PORTS.has(port)) throw refuse(`port ${port} is not allowed`);
  }

  const family = isIP(host);
  if (family) {
    // The URL parser has already normalised 2130706433, 0x7f.1, 017700000001 and [::ffff:7f00:1] forms.
    const why = check?.(host);
    if (why) throw refuse(`${url.hostname} is a ${why} address`);
    return [{ address: host, family }];
  }

  const nameWhy = check && hostnameRefusal(host);
  if (nameWhy) throw refuse(`${host} is a ${nameWhy} host name`);
  let addresses: LookupAddress[];
  try {
    addresses = await abortable((options.resolve ?? defaultResolver)(host), signal);
  } catch (err) {
    if (signal.aborted) throw err;
    throw new OutboundError("NETWORK_ERROR", `could not resolve ${host} (${describe(err)})`);
  }
  if (addresses.length === 0) throw new OutboundError("NETWORK_ERROR", `could not resolve ${host} (no addresses)`);
  for (const { address } of addresses) {
    // The address itself stays out of the message: it would map internal names for whoever wrote the URL.
    const why = check?.(address);
    if (why) throw refuse(`${host} resolves to a ${why} address`);
  }
  return addresses;
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** A `lookup` that answers with the checked addresses only: the socket cannot reach anything else. */
function pinned(addresses: LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const usable = options.family ? addresses.filter((a) => a.family === options.family) : addresses;
    if (usable.length === 0) {
      callback(Object.assign(new Error("no address of the requested family"), { code: "ENOTFOUND" }), "", 0);
    } else if (options.all) {
      callback(null, usable);
    } else {
      callback(null, usable[0]!.address, usable[0]!.family);
    }
  };
}

function send(
  url: URL,
  method: Method,
  headers: Record<string, string>,
  body: string | undefined,
  addresses: LookupAddress[],
  signal: AbortSignal,
): Promise<{ req: http.ClientRequest; res: IncomingMessage }> {
  const transport = url.protocol === "https:" ? https : http;
  const payload = body === undefined ? undefined : Buffer.from(body, "utf8");
  const all = payload ? { ...headers, "content-length": String(payload.length) } : headers;
  return new Promise((resolve, reject) => {
    // agent: false gives every request its own socket, so no connection made for another hop or host is reused.
    const req = transport.request(url, { method, headers: all, agent: false, lookup: pinned(addresses), signal }, (res) =>
      resolve({ req, res }),
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** The decoded body, aborting the connection as soon as it exceeds `max` bytes. */
async function readBody(
  req: http.ClientRequest,
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
function responseHeaders(res: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = Object.prototype.hasOwnProperty.call(out, name) ? `${out[name]}, ${raw[i + 1]}` : raw[i + 1]!;
    Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** JSON when the body parses as JSON (whatever the Content-Type claims), else the text in its charset. */
async function parseData(raw: Buffer, contentType: string | undefined, beforeParse?: (bytes: number) => void): Promise<unknown> {
  const charset = /;\s*charset="?([^";\s]+)/i.exec(contentType ?? "")?.[1];
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset ?? "utf-8");
  } catch {
    decoder = new TextDecoder("utf-8");
  }
  const text = decoder.decode(raw);
  refusable(() => beforeParse?.(raw.length));
  if (text.trim() === "") return text;
  // Held as text, never parsed whole here (§18.2): a body of tiny objects would expand many times over.
  const checked = await checkJsonInSlices(text);
  if (!checked.ok) return text;
  if (checked.depth > MAX_RESPONSE_DEPTH) throw new OutboundError("INVALID_RESPONSE", `response JSON nested deeper than ${MAX_RESPONSE_DEPTH} levels`);
  return checked.json.isContainer ? checked.json : JSON.parse(checked.json.text);
}

/** What a caller's hook threw, passed through as it is. */
class Refused {
  constructor(readonly reason: unknown) {}
}

function refusable(hook: (() => void) | undefined): void {
  try {
    hook?.();
  } catch (reason) {
    throw new Refused(reason);
  }
}

/** A low-level failure described by its code (ECONNREFUSED, CERT_HAS_EXPIRED...), never by a message that may quote data. */
function describe(err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === "string") return code;
  return err instanceof Error ? err.name : "unknown error";
}
