/** The message of a caller's cut-off (the signal's reason): a simulation at its cap, say. */
export function cutOffMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : typeof reason === "string" ? reason : "evaluation cancelled";
}
