/** restApi (API.md §8.4.5): one guarded outbound request; status 400 or above fails the step, output kept. */
import { fetchGuarded, type GuardOptions } from "../http";
import type { NodeOf } from "../../workflow/schemas";
import { httpUrl } from "./inputs";
import { StepFailure, type NodeEnv, type NodeKind } from "./kind";

type Config = NodeOf<"restApi">["config"];

export const guardOptions = (env: NodeEnv): GuardOptions => ({
  timeoutMs: env.limits.httpNodeTimeoutMs,
  maxResponseBytes: env.limits.httpNodeMaxResponseBytes,
  allowPrivateNetwork: env.allowPrivateNetwork,
});

export const httpError = (status: number, statusText: string) => `HTTP ${status} ${statusText}`.trimEnd();

export const restApi: NodeKind<Config> = {
  async run(stored, env) {
    const config = env.render(stored);
    const response = await fetchGuarded(
      {
        url: httpUrl(config.url, "url"),
        method: config.method,
        ...(config.headers ? { headers: config.headers } : {}),
        ...(config.body !== undefined ? { body: config.body } : {}),
      },
      guardOptions(env),
    );
    if (response.status >= 400) throw new StepFailure("HTTP_ERROR", httpError(response.status, response.statusText), response);
    return { data: response };
  },
};
