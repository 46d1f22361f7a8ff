/** restApi (API.md §8.4.5): one guarded outbound request; status 400 or above fails the step, output kept. */
import { fetchGuarded } from "../../outbound/client";
import * as v from "valibot";
import { httpUrl } from "../support/inputs";
import { guardOptions, httpError, sensitiveHeaders } from "../support/http-step";
import { StepFailure, defineNode, nodeShape } from "../kind";
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
