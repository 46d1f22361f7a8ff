/**
 * The marker a log ends with when it was cut at its byte limit (the sandbox's console, a step's log). Its own
 * module so that redaction and the engine need not load the sandbox (QuickJS) to know it.
 */
export const LOG_TRUNCATED_MARKER = "…[truncated]";
