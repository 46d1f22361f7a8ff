/**
 * Where the outbound client connects (shared/outbound/client.ts): each hop's destination checked (ports, host
 * names, every resolved address) and the socket pinned to exactly the checked addresses, so the check and the
 * connection cannot disagree (DNS rebinding).
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { addressRefusal, hostnameRefusal } from "./ip";
import { describe, OutboundError, type GuardOptions, type Method, type Resolver } from "./types";

/**
 * Fetch's "bad ports" (fetch.spec.whatwg.org): ports of protocols that an HTTP request could be smuggled
 * into (SMTP, IRC...). Refused like private addresses.
 */
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117,
  119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636,
  989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

const defaultResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** The checked addresses to connect to for this URL; throws DESTINATION_NOT_ALLOWED or NETWORK_ERROR. */
export async function destination(url: URL, options: GuardOptions, signal: AbortSignal): Promise<LookupAddress[]> {
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

export function send(
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
