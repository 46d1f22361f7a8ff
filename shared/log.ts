/**
 * Structured JSON log lines on stdout. Never pass secret values or keys here.
 * The level has one source, the LOG_LEVEL setting (shared/config.ts): each host applies its configuration's
 * `logLevel` with setLogLevel (wireAws, local/start.ts); until then, info.
 */
import { AsyncLocalStorage } from "node:async_hooks";

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
type Level = keyof typeof LEVELS;

let threshold: number = LEVELS.info;

export function setLogLevel(level: Level) {
  threshold = LEVELS[level];
}

/** Fields every line written inside one invocation carries: on Lambda, its `awsRequestId`. */
const invocation = new AsyncLocalStorage<{ awsRequestId: string }>();

/** Runs `work` with every log line it writes, however deep and however late, tagged with the invocation's id. */
export function inInvocation<T>(awsRequestId: string | undefined, work: () => T): T {
  return awsRequestId ? invocation.run({ awsRequestId }, work) : work();
}

function write(level: Exclude<Level, "silent">, message: string, fields: Record<string, unknown> = {}) {
  if (LEVELS[level] < threshold) return;
  const line = JSON.stringify({ level, time: new Date().toISOString(), ...invocation.getStore(), message, ...fields }, (_k, value) =>
    value instanceof Error
      ? { name: value.name, message: value.message, stack: value.stack }
      : typeof value === "bigint"
        ? value.toString()
        : value,
  );
  (level === "error" || level === "warn" ? process.stderr : process.stdout).write(line + "\n");
}

export const log = {
  debug: (message: string, fields?: Record<string, unknown>) => write("debug", message, fields),
  info: (message: string, fields?: Record<string, unknown>) => write("info", message, fields),
  warn: (message: string, fields?: Record<string, unknown>) => write("warn", message, fields),
  error: (message: string, fields?: Record<string, unknown>) => write("error", message, fields),
};
