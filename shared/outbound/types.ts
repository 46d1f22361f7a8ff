/**
 * The outbound HTTP client's types, limits and errors (shared/outbound/client.ts): the request and response, the
 * guard's options, the step errorCodes it fails with, and how a caller's refusing hook passes through.
 */
import type { LookupAddress } from "node:dns";

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
export type OutboundErrorCode =
  "INVALID_INPUT" | "NETWORK_ERROR" | "DESTINATION_NOT_ALLOWED" | "RESPONSE_TOO_LARGE" | "INVALID_RESPONSE" | "HTTP_BUDGET_EXCEEDED";

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

/** What a caller's hook threw, passed through as it is. */
export class Refused {
  constructor(readonly reason: unknown) {}
}

export function refusable(hook: (() => void) | undefined): void {
  try {
    hook?.();
  } catch (reason) {
    throw new Refused(reason);
  }
}

/** A low-level failure described by its code (ECONNREFUSED, CERT_HAS_EXPIRED...), never by a message that may quote data. */
export function describe(err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === "string") return code;
  return err instanceof Error ? err.name : "unknown error";
}
