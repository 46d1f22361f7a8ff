/** Maps a failure talking to an RPC node, bundler or paymaster to API.md's UPSTREAM_UNAVAILABLE (503 / 502). */
import { BaseError, HttpRequestError, TimeoutError } from "viem";
import { ApiError, upstreamUnavailable } from "../errors";
import { log } from "../log";

/** 503 when unreachable or timed out; 502 when it answered with something unusable. */
export function upstreamError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const unreachable =
    err instanceof BaseError
      ? Boolean(
          err.walk((e) => e instanceof TimeoutError || (e instanceof HttpRequestError && (e.status === undefined || e.status >= 500))),
        )
      : true;
  log.warn("upstream call failed", { error: err instanceof Error ? err.message.split("\n")[0] : String(err), unreachable });
  return upstreamUnavailable(!unreachable);
}
