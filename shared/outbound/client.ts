/**
 * The outbound HTTP client of the restApi and graphqlQuery nodes (API.md §8.4.4, §8.4.5, limits §4.1).
 *
 * Workflow authors choose the URL, so every request is a potential server-side request forgery. Unless the
 * deployment sets `allow_private_network`, a destination is refused (step error `DESTINATION_NOT_ALLOWED`)
 * when its host name is a metadata or localhost name, or when ANY address it resolves to is loopback,
 * private, link-local, unique-local, metadata, multicast or reserved (shared/outbound/ip.ts). The check and the
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
import http from "node:http";
import {
  MAX_REDIRECTS,
  OutboundError,
  Refused,
  describe,
  refusable,
  type GuardOptions,
  type OutboundRequest,
  type OutboundResponse,
} from "./types";
import { BODY_HEADERS, CREDENTIAL_HEADERS, parseHeaders, parseMethod, parseUrl, without } from "./request";
import { destination, send } from "./destination";
import { parseData, readBody, responseHeaders } from "./body";

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
    if (options.signal?.aborted && !deadline.signal.aborted && options.signal.reason instanceof Error)
      throw new OutboundError("NETWORK_ERROR", options.signal.reason.message);
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
