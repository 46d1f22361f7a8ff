/**
 * Rate-limit buckets (pattern 20; shared/http/rate-limit.ts explains the GCRA): one item per subject holding its
 * theoretical arrival time `tat` (µs). The two conditional forms of the one UpdateItem a request costs are owned
 * here; a failed condition answers the stored `tat`, so the caller knows whether to try the other form or deny.
 */
import { defineEntity } from "../entity";
import { add, set, when, type UpdateAction } from "../expression";
import { Keys } from "../item-keys";
import { isConditionFailure, TTL_ATTRIBUTE } from "../table";

const RateLimitBucket = defineEntity({
  type: "rateLimit",
  version: 1,
  key: (subject: string) => Keys.rateLimit(subject),
});

/** A written bucket's new tat, or the stored tat a failed condition saw (undefined: no bucket). */
export type BucketWrite = { written: true; tat: number } | { written: false; tat?: number };

/** `advance`: tat += interval, if now ≤ tat ≤ last (the bucket is partly used and has a token). */
export interface Advance {
  form: "advance";
  now: number;
  interval: number;
  last: number;
  expiresAt: number;
}

/** `reset`: tat := fresh, if tat is absent, stale (< now) or impossible (> impossible). */
export interface Reset {
  form: "reset";
  now: number;
  fresh: number;
  impossible: number;
  expiresAt: number;
}

/** One conditional UpdateItem on `subject`'s bucket. */
export async function writeBucket(subject: string, w: Advance | Reset): Promise<BucketWrite> {
  const stamp: UpdateAction[] = [set("type", RateLimitBucket.type), set("v", RateLimitBucket.version), set(TTL_ATTRIBUTE, w.expiresAt)];
  const [actions, condition] =
    w.form === "advance"
      ? // `tat` exists whenever the condition holds, so `add` is tat + interval.
        [[add("tat", w.interval), ...stamp], when.and(when.ge("tat", w.now), when.le("tat", w.last))]
      : [[set("tat", w.fresh), ...stamp], when.or(when.notExists("tat"), when.lt("tat", w.now), when.gt("tat", w.impossible))];
  try {
    const updated = await RateLimitBucket.update(subject, actions, {
      if: condition,
      returnValues: "UPDATED_NEW",
      returnOldOnFailure: true,
    });
    return { written: true, tat: Number(updated?.tat) };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // The document client does not unmarshall the item carried by the exception: it is a raw AttributeValue map.
    const stored = (err as { Item?: { tat?: { N?: string } } }).Item?.tat?.N;
    return { written: false, tat: stored === undefined ? undefined : Number(stored) };
  }
}
