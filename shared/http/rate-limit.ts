/**
 * Rate limiting (API.md §4.2): a token bucket per subject, capacity `rate_limit_burst`, refilled at
 * `rate_limit_rps`, kept in the table (pattern 20 of shared/store/README.md) so every process (each Lambda
 * instance, the local server) shares one bucket per subject.
 *
 * The bucket is stored as GCRA: one theoretical arrival time `tat` per subject. With the emission interval
 * T = 1 s / rps and capacity B, the bucket holds B − (tat − now) / T tokens (full when tat ≤ now). A request is
 * allowed when max(tat, now) + T − now ≤ B·T, and then tat := max(tat, now) + T. An update expression has no
 * max(), so there are two conditional forms of one UpdateItem:
 *   advance  SET tat = tat + T     IF now ≤ tat ≤ now + (B−1)·T   (the bucket is partly used and has a token)
 *   reset    SET tat = now + T     IF tat is absent, stale (< now) or impossible (see MAX_CLOCK_SKEW_US)
 * A failed condition returns the stored item (ReturnValuesOnConditionCheckFailure: ALL_OLD), which says
 * whether to try the other form or to deny: a denial writes nothing, so a rejected request consumes nothing.
 * The first form is guessed from the last `tat` this process saw for the subject (a bounded LRU), so a busy
 * subject costs exactly one write per allowed request, and so does the first request after an idle spell; a
 * request that the remembered tat already denies costs none. A subject's writes run at most `SUBJECT_LANES` at
 * once in a process (shared/owner-lanes.ts), the rest queued behind them: a burst of one subject's concurrent
 * requests (200 stream opens) costs that subject's lanes of the table's connection pool, not the pool, and once
 * the first writes have answered the remembered tat is current, so the burst costs one write per allowed request
 * (without the queue, 200 requests on a fresh subject cost ~400: one reset won, 199 lost and advanced) and
 * none past the bucket.
 *
 * `tat` is stored in integer MICROseconds, not milliseconds: T = 1000/rps ms is fractional for most rps
 * (rps 3 → 333.33 ms), and DynamoDB adds decimals exactly while JavaScript compares doubles, so a fractional
 * T could let the two disagree at the boundary. In µs T is rounded to a whole number (error ≤ 0.5 µs per
 * token) and every sum stays an exact integer on both sides (µs since 1970 fit 2^53 until the year 2255).
 */
import { log } from "../log";
import { OwnerLanes } from "../owner-lanes";
import { writeBucket, type BucketWrite } from "../store/entities/rate-limit-bucket";
import { useRuntime } from "../current-runtime";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds, rounded up, at which the bucket is full again. */
  resetAt: number;
  /** Whole seconds (at least 1) until a token is available; only when not allowed. */
  retryAfter?: number;
}

/**
 * Bucket subjects: the JWT subject (lower-case, so case never splits a bucket), a partner (API.md §21.1: each
 * partner its own bucket, whichever users its assertions name) or the client address.
 */
export const RateSubject = {
  owner: (owner: string) => `sub:${owner.toLowerCase()}`,
  partner: (id: string) => `partner:${id}`,
  ip: (address: string) => `ip:${address}`,
};

/** Subjects whose last `tat` one process remembers (about 100 bytes each). */
const MAX_HINTS = 10_000;
/** Writes of one subject in flight at once in a process. */
const SUBJECT_LANES = 4;
/** Two forms and one race between them need 3 writes at most; a 4th failure means heavy contention. */
const MAX_ATTEMPTS = 4;
/**
 * A stored `tat` more than B·T ahead of now cannot come from a clock that agrees with ours (an allowed
 * request never leaves it further ahead than that). Beyond this tolerance the stored state is treated as
 * garbage and reset, so a clock that went back (a skewed instance, a test's fixed clock) never locks a
 * subject out; within it, it is ordinary skew between instances and is honoured (denied).
 */
const MAX_CLOCK_SKEW_US = 1_000_000;

type Form = "advance" | "reset";

/** The bucket's parameters at one instant, all in µs. */
interface Frame {
  now: number;
  /** Emission interval T. */
  interval: number;
  burst: number;
}

export class RateLimiter {
  /** Last `tat` seen per subject, least recently used first (Map keeps insertion order). */
  private readonly hints = new Map<string, number>();
  private readonly lanes = new OwnerLanes(SUBJECT_LANES);

  /**
   * Takes one token from `subject`'s bucket. Answers undefined when the limiter could not decide: then the
   * request is served without rate-limit headers.
   */
  take(subject: string): Promise<RateDecision | undefined> {
    const known = this.knownDenial(subject);
    return known ? Promise.resolve(known) : this.lanes.run(subject, () => this.decide(subject));
  }

  /** take() in the subject's lane: decided from the hint as it is now, else by writing. */
  private async decide(subject: string): Promise<RateDecision | undefined> {
    const frame = currentFrame();
    const hint = this.hints.get(subject);
    const guess = classify(hint, frame);
    // `tat` only moves forward while a bucket is in use, so a remembered tat that already denies proves the
    // stored one denies too: answered here with no write. A flood over the limit then costs the table nothing
    // and cannot throttle it into failing open. Retry-After is computed from the remembered tat, so it may be
    // early when other instances took tokens meanwhile; the retry is then simply denied again.
    if (guess === "denied") return decision(frame, hint!, false);
    let form: Form = guess;
    try {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const outcome = await write(subject, form, frame);
        if (outcome.tat !== undefined) this.remember(subject, outcome.tat);
        if (outcome.written) return decision(frame, outcome.tat, true);
        const next = classify(outcome.tat, frame);
        if (next === "denied") return decision(frame, outcome.tat!, false);
        form = next;
      }
      log.warn("rate limiter: too many concurrent updates; request served uncounted", { subject });
      return undefined;
    } catch (err) {
      // Fail OPEN: a throttled or unreachable table must not turn every request into a 500. The request is
      // served uncounted (and without rate-limit headers); quotas and every other check still apply.
      log.warn("rate limiter unavailable; request served uncounted (fail open)", { subject, error: err });
      return undefined;
    }
  }

  /** The denial this instance can already prove for `subject` (see take), without touching the table. */
  knownDenial(subject: string): RateDecision | undefined {
    const frame = currentFrame();
    const hint = this.hints.get(subject);
    return classify(hint, frame) === "denied" ? decision(frame, hint!, false) : undefined;
  }

  private remember(subject: string, tat: number) {
    this.hints.delete(subject); // re-insert: Map order = least recently used first
    this.hints.set(subject, tat);
    if (this.hints.size > MAX_HINTS) this.hints.delete(this.hints.keys().next().value!);
  }
}

function currentFrame(): Frame {
  const { config, now } = useRuntime();
  return {
    now: Math.round(now() * 1000),
    interval: Math.max(1, Math.round(1_000_000 / config.limits.rateLimitRps)),
    burst: config.limits.rateLimitBurst,
  };
}

/** What a stored (or remembered) `tat` calls for. */
function classify(tat: number | undefined, f: Frame): Form | "denied" {
  if (tat === undefined || tat < f.now || tat > f.now + f.burst * f.interval + MAX_CLOCK_SKEW_US) return "reset";
  return tat > f.now + (f.burst - 1) * f.interval ? "denied" : "advance";
}

/** One conditional UpdateItem (shared/store/entities/rate-limit-bucket.ts); a failed condition answers the stored tat. */
function write(subject: string, form: Form, f: Frame): Promise<BucketWrite> {
  // The item is worthless once tat has passed (a full bucket is the same as no item): let TTL remove it.
  const expiresAt = Math.ceil((f.now + f.burst * f.interval) / 1_000_000) + 1;
  return writeBucket(
    subject,
    form === "advance"
      ? { form, now: f.now, interval: f.interval, last: f.now + (f.burst - 1) * f.interval, expiresAt }
      : { form, now: f.now, fresh: f.now + f.interval, impossible: f.now + f.burst * f.interval + MAX_CLOCK_SKEW_US, expiresAt },
  );
}

/** The headers' numbers (API.md §4.2) from the bucket's tat after an allowed request, or as stored when denied. */
function decision(f: Frame, tat: number, allowed: boolean): RateDecision {
  const capacity = f.burst * f.interval;
  return {
    allowed,
    limit: f.burst,
    remaining: Math.max(0, Math.floor((capacity - (tat - f.now)) / f.interval)),
    resetAt: Math.ceil(tat / 1_000_000),
    ...(allowed ? {} : { retryAfter: Math.max(1, Math.ceil((tat + f.interval - capacity - f.now) / 1_000_000)) }),
  };
}
