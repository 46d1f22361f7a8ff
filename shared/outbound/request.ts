/**
 * The outbound request as the author wrote it, checked (shared/outbound/client.ts): the URL, the method and the
 * headers, and the headers a redirect drops.
 */
import { METHODS, OutboundError, type Method } from "./types";

/** Request headers the client sets itself: framing, connection management, the host and the encodings. */
const CLIENT_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "upgrade",
  "te",
  "trailer",
  "expect",
  "accept-encoding",
]);
/**
 * Dropped when a redirect leaves the origin (scheme, host or port; API.md §18.3): fetch drops Authorization,
 * cookies and proxy credentials are credentials too. The request's `sensitiveHeaders` are dropped with them.
 */
export const CREDENTIAL_HEADERS = ["authorization", "proxy-authorization", "cookie"];
/** Dropped with the body when a redirect turns the request into a GET. */
export const BODY_HEADERS = ["content-type", "content-encoding", "content-language", "content-location"];

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function parseUrl(text: string): URL {
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

export function parseMethod(text = "GET"): Method {
  const method = text.toUpperCase();
  if (!(METHODS as readonly string[]).includes(method)) {
    throw new OutboundError("INVALID_INPUT", `method must be one of ${METHODS.join(", ")}`);
  }
  return method as Method;
}

export function parseHeaders(input: Record<string, string> = {}): Record<string, string> {
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

export function without(headers: Record<string, string>, names: string[]): Record<string, string> {
  const out = { ...headers };
  for (const name of names) delete out[name];
  return out;
}
