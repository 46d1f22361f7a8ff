/**
 * Calls `cutOff` once `signal` (a caller's, if any) aborts; answers what undoes that, for when the evaluation is
 * settled first. The sandbox ports (./pool.ts, ./remote.ts) tie each queued evaluation to its caller this way.
 */
export function onCutOff(signal: AbortSignal | undefined, cutOff: () => void): () => void {
  if (!signal) return () => undefined;
  signal.addEventListener("abort", cutOff, { once: true });
  return () => signal.removeEventListener("abort", cutOff);
}

/** The message of a caller's cut-off (the signal's reason): a simulation at its cap, say. */
export function cutOffMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : typeof reason === "string" ? reason : "evaluation cancelled";
}
