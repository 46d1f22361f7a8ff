/**
 * The time a withdrawal request may take (API.md §11.5): its record must be stored by `recordBy`, else it answers
 * 503 UPSTREAM_UNAVAILABLE with nothing recorded (and nothing is recorded or sent later either); once stored, the
 * answer comes within `withdraw_confirm_wait_ms` (and by `answerBy`, the function's remaining time on Lambda), as
 * `pending` when no receipt came, the send and its follow-up going on behind the answer.
 */
import { upstreamUnavailable } from "../errors";
import type { Result } from "./withdraw-request";
import { useConfig } from "../current-runtime";

/** Time kept after `recordBy` to store the record and complete the Idempotency-Key before the answer. */
const RECORD_MARGIN_MS = 2_000;
/** Time kept before the function is ended to complete the key and send the answer. */
const ANSWER_MARGIN_MS = 1_000;

export interface Deadlines {
  /** Epoch ms (Date.now): the record is stored by then or never. */
  recordBy: number;
  /** Epoch ms: the answer leaves by then. */
  answerBy: number;
}

/**
 * A request's deadlines from its start and the end of the function running it (`endsAt`): the record by half the
 * Idempotency-Key lease (so a request that holds a key has answered well before a repeat may take it over), and
 * margins before the function ends.
 */
export function deadlinesFrom(start: number, endsAt = Infinity): Deadlines {
  const answerBy = endsAt - ANSWER_MARGIN_MS;
  return { recordBy: Math.min(start + useConfig().limits.idempotencyLeaseMs / 2, answerBy - RECORD_MARGIN_MS), answerBy };
}

/** Where a withdrawal stands against `recordBy`: preparing; recording (or recorded, `stored`); or abandoned (503 answered). */
export class Recording {
  private state: "preparing" | "recording" | "abandoned" = "preparing";
  private resolveStored!: (result: Result) => void;
  private rejectStored!: (err: unknown) => void;
  /** The recorded withdrawal once its record is stored; rejects when storing it failed. */
  readonly stored = new Promise<Result>((resolve, reject) => {
    this.resolveStored = resolve;
    this.rejectStored = reject;
  });

  constructor(readonly recordBy: number) {
    this.stored.catch(() => undefined); // awaited only when the deadline came during the write
  }

  /** Stores the record with `write` if the deadline has not passed (else throws: nothing recorded, nothing sent). */
  async record(write: () => Promise<Result>): Promise<Result> {
    if (this.state === "abandoned" || Date.now() >= this.recordBy) throw tooLate();
    this.state = "recording";
    try {
      const result = await write();
      this.resolveStored(result);
      return result;
    } catch (err) {
      this.rejectStored(err);
      throw err;
    }
  }

  /** Whether anything was (or is being) recorded: then the Idempotency-Key must not be released. */
  get begun(): boolean {
    return this.state === "recording";
  }

  /** At `recordBy`: abandons a withdrawal not being recorded yet (true), so it never will be. */
  abandon(): boolean {
    if (this.state !== "preparing") return false;
    this.state = "abandoned";
    return true;
  }
}

/** 503: the upstream calls before the record did not finish in time (API.md §2: the generic detail). */
export const tooLate = () => upstreamUnavailable();

/** `work`'s value if it settles by `at` (epoch ms), else `undefined`; its rejection is thrown. No timer is left behind. */
export async function by<T>(work: Promise<T>, at: number): Promise<T | undefined> {
  if (at === Infinity) return work;
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, Math.max(0, at - Date.now()), undefined)));
  try {
    return await Promise.race([work, expiry]);
  } finally {
    clearTimeout(timer);
  }
}
