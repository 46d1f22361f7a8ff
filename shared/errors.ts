/**
 * Errors we mean to show. Anything else thrown is logged and answered as a generic 500 (shared/http/app.ts).
 * Codes and statuses are those of API.md §15.
 */
export interface FieldError {
  /** `body.`, `query.`, `path.` or `header.` followed by a dotted path, e.g. `body.nodes[2].name`. */
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: {
      errors?: FieldError[];
      limit?: number;
      reason?: string;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/**
 * The client went away before its answer (an upload dropped mid-body, a stream open aborted): its own doing, not
 * a fault of ours, so it is logged as one quiet line (shared/http/app.ts). The answer reaches nobody.
 */
export class ClientGone extends ApiError {
  constructor(what: string) {
    super(400, "MALFORMED_REQUEST", `The client went away: ${what}.`);
    this.name = "ClientGone";
  }
}

export const validationFailed = (errors: FieldError[], code = "VALIDATION_FAILED") =>
  new ApiError(400, code, "Request validation failed.", { errors });

export const notFound = (code: string, what: string) => new ApiError(404, code, `${what} was not found.`);

export const upstreamUnavailable = (invalidAnswer = false, detail = "The chain RPC or bundler is unavailable.") =>
  new ApiError(invalidAnswer ? 502 : 503, "UPSTREAM_UNAVAILABLE", detail);

export const quotaReached = (code: string, what: string, limit: number) =>
  new ApiError(429, code, `The limit of ${limit} ${what} has been reached.`, { limit });
