/** The provider's refusals and failures (watcher.ts, "Requests"): what a refusal says, a request's time bound. */
export class TooManyLogs extends Error {
  constructor(
    readonly count: number,
    limit: number,
  ) {
    super(`query returned more than ${limit} results (${count})`);
  }
}

class RequestTimeout extends Error {}

export function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RequestTimeout(`eth_getLogs timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** The provider's own words (never the request, which may carry 1,000 addresses), at most 200 characters. */
export function brief(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e && depth < 4; depth++, e = (e as { cause?: unknown }).cause) {
    const o = e as { details?: unknown; shortMessage?: unknown; message?: unknown; code?: unknown; status?: unknown };
    if (typeof o.details === "string" && o.details) {
      parts.push(o.details);
      if (o.code !== undefined) parts.push(`code ${String(o.code)}`);
      if (o.status !== undefined) parts.push(`status ${String(o.status)}`);
      break;
    }
    if (!(e as { cause?: unknown }).cause)
      parts.push(typeof o.shortMessage === "string" ? o.shortMessage : typeof o.message === "string" ? o.message : String(e));
  }
  const text = parts.join("; ");
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}

/**
 * What a refusal says: the block range is too large, the request names too many addresses, the answer would hold
 * too many results, or something else (a failure). Read from the provider's message (Infura, Alchemy, QuickNode,
 * geth, erigon wordings) and code -32005 (limit exceeded).
 */
export function classify(err: unknown): "range" | "addresses" | "results" | "other" {
  if (err instanceof TooManyLogs) return "results";
  if (err instanceof RequestTimeout) return "other";
  const text = brief(err).toLowerCase();
  // A rate limit is a failure like any other (backoff), whatever its code says.
  if (/(rate limit|rate-limit|too many requests|status 429|daily request|capacity)/.test(text)) return "other";
  if (
    /(more than \d+ (results|logs)|too many (results|logs)|response size|results? (limit|exceed)|logs? limit|limit exceeded|query timeout|returned more than|response is too big|code -32005)/.test(
      text,
    )
  )
    return "results";
  if (/address/.test(text) && /(too many|exceed|limit|maximum|max\b|at most|up to)/.test(text)) return "addresses";
  if (
    /(block range|range (is )?too (large|wide|big)|range limit|blocks? range|range exceeds|range should|max(imum)? (block )?range|too many blocks)/.test(
      text,
    )
  )
    return "range";
  return "other";
}
