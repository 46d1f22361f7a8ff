/** restApi (API.md §8.4.5): one guarded outbound request; status 400 or above fails the step, output kept. */
import { fetchGuarded } from "../../outbound/client";
import { type GuardOptions } from "../../outbound/types";
import { createRedactor } from "../../secret/redact";
import { referencedPaths } from "../../templates";
import * as v from "valibot";
import { httpUrl } from "../support/inputs";
import { StepFailure, defineNode, nodeShape, type NodeEnv } from "../kind";
import { TemplateText, TemplatedAny, UrlOrTemplate, opt, record, str, strict, stringMap } from "../support/schema-kit";

const methodPattern = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
  .map((m) => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join(""))
  .join("|");
const config = strict(
  {
    url: UrlOrTemplate,
    method: v.pipe(
      str(),
      v.regex(new RegExp(`^(?:${methodPattern})$`), "must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"),
      v.description("GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS, case-insensitive, stored uppercase."),
      v.transform((m) => m.toUpperCase() as "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"),
    ),
    headers: opt(stringMap(TemplateText, 50)),
    body: opt(TemplateText),
    options: opt(v.pipe(record(str(), TemplatedAny), v.description("Accepted for client compatibility; no effect."))),
  },
  "restApi. `body` is not allowed with GET or HEAD.",
);
type Config = v.InferOutput<typeof config>;

export const guardOptions = (env: NodeEnv): GuardOptions => ({
  timeoutMs: env.limits.httpNodeTimeoutMs,
  maxResponseBytes: env.limits.httpNodeMaxResponseBytes,
  allowPrivateNetwork: env.allowPrivateNetwork,
  ...(env.signal ? { signal: env.signal } : {}),
  beforeSend: () => env.takeRequest(),
  beforeParse: (bytes) => env.holdState(bytes),
});

export const httpError = (status: number, statusText: string) => `HTTP ${status} ${statusText}`.trimEnd();

/** Template roots whose values are the run's secrets (`apContext.configVars` is the `secrets` object). */
const SECRET_ROOTS = new Set(["secrets", "apContext"]);

/**
 * The names of the headers that carry a secret, dropped when a redirect leaves the origin (API.md §18.3):
 * those whose stored template refers to `secrets` or `apContext`, and those whose final value holds one of
 * the run's secret values (`env.variables.secrets`) in any form the step record's redaction recognises (a
 * secret passed on through another node's output, or encoded there, as in `Basic base64(user:secret)`;
 * secrets under 4 bytes only where they are the whole value, as in redaction).
 */
export function sensitiveHeaders(
  env: NodeEnv,
  stored: Readonly<Record<string, string>> | undefined,
  rendered: Readonly<Record<string, string>> | undefined,
): string[] {
  if (!rendered) return [];
  const secrets = env.variables.secrets;
  const values =
    secrets !== null && typeof secrets === "object" ? Object.values(secrets).filter((v): v is string => typeof v === "string") : [];
  const redactor = values.length > 0 ? createRedactor(values) : undefined;
  return Object.entries(rendered)
    .filter(([name, value]) => {
      const template = stored?.[name];
      if (template !== undefined && referencedPaths(template).some((p) => SECRET_ROOTS.has(p.root))) return true;
      return redactor !== undefined && typeof value === "string" && redactor.text(value) !== value;
    })
    .map(([name]) => name);
}

export const restApiShape = nodeShape({
  type: "restApi",
  doc: "One HTTP request through the guarded outbound client; status 400 or above fails the step.",
  config: () => config,
  inLoop: true,
  writesOnChain: false,
});

export const restApi = /* @__PURE__ */ defineNode(restApiShape, {
  problems(config, at, add) {
    const method = typeof config.method === "string" ? config.method.toUpperCase() : undefined;
    const body = config.body !== undefined && config.body !== null;
    if (body && (method === "GET" || method === "HEAD")) add(`${at}.body`, `is not allowed with ${method}`);
  },
  cutOff: "NETWORK_ERROR",
  run: async (stored: Config, env) => {
    const config = env.render(stored);
    const sensitive = sensitiveHeaders(env, stored.headers, config.headers);
    const response = await fetchGuarded(
      {
        url: httpUrl(config.url, "url"),
        method: config.method,
        ...(config.headers ? { headers: config.headers } : {}),
        ...(config.body !== undefined ? { body: config.body } : {}),
        ...(sensitive.length > 0 ? { sensitiveHeaders: sensitive } : {}),
      },
      guardOptions(env),
    );
    if (response.status >= 400) throw new StepFailure("HTTP_ERROR", httpError(response.status, response.statusText), response);
    return { data: response };
  },
});
