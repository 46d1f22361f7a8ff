/** RFC 7807 problem bodies (API.md §2). */
import { STATUS_CODES } from "node:http";
import type { FieldError } from "../errors";

export interface Problem {
  type: "about:blank";
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: string;
  errors?: FieldError[];
  reason?: string;
  limit?: number;
}

export interface ProblemInput {
  status: number;
  code: string;
  detail: string;
  requestId: string;
  errors?: FieldError[];
  reason?: string;
  limit?: number;
}

export function problemResponse(p: ProblemInput, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(problemBody(p)), {
    status: p.status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

export function problemBody(p: ProblemInput): Problem {
  return {
    type: "about:blank",
    title: STATUS_CODES[p.status] ?? "Error",
    status: p.status,
    detail: p.detail,
    instance: p.requestId,
    code: p.code,
    ...(p.errors ? { errors: p.errors } : {}),
    ...(p.reason ? { reason: p.reason } : {}),
    ...(p.limit !== undefined ? { limit: p.limit } : {}),
  };
}
