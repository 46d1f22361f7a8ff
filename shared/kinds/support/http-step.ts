/**
 * What the nodes that send HTTP share (restApi, graphqlQuery, API.md §8.4.4, §8.4.5): the guard's options from the
 * deployment's settings and the run, the error text of a failing status, and the headers a redirect to another
 * origin drops because they carry a secret (§18.3).
 */
import type { GuardOptions } from "../../outbound/types";
import { createRedactor } from "../../secret/redact";
import { referencedPaths } from "../../templates";
import type { NodeEnv } from "../kind";

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
