/**
 * What a step record may hold (API.md §10.2, limits §4.1): the recorded output is at most
 * `max_step_output_bytes` serialized (else `{data: null, truncated: true, originalSize}`; later nodes of the run
 * still saw the full value), the log at most `max_step_log_bytes` UTF-8 bytes ending `…[truncated]` when cut.
 */
import { LOG_TRUNCATED_MARKER } from "../sandbox/log-marker";
import { materialize, stringify } from "../json-text";

/**
 * The output as recorded: the truncation marker object when its JSON is over `maxBytes`, else the output as
 * a plain value (parts held as JSON text parsed: at most `maxBytes` of them), passed through `redact`.
 */
export async function recordedOutput(
  output: Record<string, unknown>,
  maxBytes: number,
  redact: (value: Record<string, unknown>) => Record<string, unknown> | Promise<Record<string, unknown>> = (value) => value,
  text = stringify(output),
): Promise<Record<string, unknown>> {
  const size = Buffer.byteLength(text);
  return size > maxBytes ? { data: null, truncated: true, originalSize: size } : redact(materialize(output) as Record<string, unknown>);
}

/** `log` cut to `maxBytes` UTF-8 bytes, the marker included, never inside a UTF-8 sequence. */
export function limitLog(log: string, maxBytes: number): string {
  const bytes = Buffer.from(log);
  if (bytes.length <= maxBytes) return log;
  let end = Math.max(0, maxBytes - Buffer.byteLength(LOG_TRUNCATED_MARKER));
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString() + LOG_TRUNCATED_MARKER;
}
