/**
 * Token bucket per subject (API.md §4.2): capacity `rate_limit_burst`, refilled at `rate_limit_rps`.
 * Kept in process memory: on the local server that is exact; on Lambda each warm instance keeps its own
 * buckets, which bounds a caller per instance (see README, "Rate limiting").
 */
interface Bucket {
  tokens: number;
  updatedAt: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds, rounded up, at which the bucket is full again. */
  resetAt: number;
  /** Whole seconds (at least 1) until a token is available; only when not allowed. */
  retryAfter?: number;
}

const MAX_BUCKETS = 100_000;

export class TokenBuckets {
  private buckets = new Map<string, Bucket>();

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
  ) {}

  take(key: string, now: number): RateDecision {
    const bucket = this.refilled(key, now);
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.delete(key); // re-insert to keep Map order = least recently used first
    this.buckets.set(key, bucket);
    if (this.buckets.size > MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
    const secondsToFull = (this.capacity - bucket.tokens) / this.refillPerSecond;
    return {
      allowed,
      limit: this.capacity,
      remaining: Math.floor(bucket.tokens),
      resetAt: Math.ceil(now / 1000 + secondsToFull),
      ...(allowed ? {} : { retryAfter: Math.max(1, Math.ceil((1 - bucket.tokens) / this.refillPerSecond)) }),
    };
  }

  private refilled(key: string, now: number): Bucket {
    const bucket = this.buckets.get(key) ?? { tokens: this.capacity, updatedAt: now };
    const elapsed = Math.max(0, now - bucket.updatedAt) / 1000;
    return { tokens: Math.min(this.capacity, bucket.tokens + elapsed * this.refillPerSecond), updatedAt: now };
  }
}
