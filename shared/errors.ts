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

export const validationFailed = (errors: FieldError[], code = "VALIDATION_FAILED") =>
  new ApiError(400, code, "Request validation failed.", { errors });

export const notFound = (code: string, what: string) => new ApiError(404, code, `${what} was not found.`);

export const upstreamUnavailable = (invalidAnswer = false, detail = "The chain RPC or bundler is unavailable.") =>
  new ApiError(invalidAnswer ? 502 : 503, "UPSTREAM_UNAVAILABLE", detail);

export const quotaReached = (code: string, what: string, limit: number) =>
  new ApiError(429, code, `The limit of ${limit} ${what} has been reached.`, { limit });
