/**
 * graphqlQuery (API.md §8.4.4): POST `{query, variables}` as JSON. Status 400 or above, a body that is not a
 * JSON object, or a non-empty `errors` array fails the step (HTTP_ERROR); the parsed body is the output
 * either way.
 */
import { fetchGuarded } from "../../outbound/client";
import * as v from "valibot";
import { httpUrl } from "../support/inputs";
import { JsonText, member, parse } from "../../json-text";
import { StepFailure, defineNode, nodeShape, type SchemaContext } from "../kind";
import { guardOptions, httpError, sensitiveHeaders } from "../support/http-step";
import { TemplateText, UrlOrTemplate, opt, record, str, strict } from "../support/schema-kit";

const config = ({ limits }: Pick<SchemaContext, "limits">) =>
  strict({
    url: UrlOrTemplate,
    query: v.pipe(TemplateText, v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`)),
    variables: opt(record(str(), TemplateText, "must be an object of strings")),
  });
type Config = v.InferOutput<ReturnType<typeof config>>;

export const graphqlQueryShape = nodeShape({
  type: "graphqlQuery",
  doc: "POSTs a GraphQL query through the guarded outbound client.",
  config,
  inLoop: true,
  writesOnChain: false,
});

export const graphqlQuery = /* @__PURE__ */ defineNode(graphqlQueryShape, {
  cutOff: "NETWORK_ERROR",
  run: async (stored: Config, env) => {
    const config = env.render(stored);
    // The headers are the service's own today (the config has none to template), so none should carry a
    // secret; they go through the same check as restApi's so that stays true if the config gains headers.
    const headers = { "content-type": "application/json", accept: "application/json" };
    const response = await fetchGuarded(
      {
        url: httpUrl(config.url, "url"),
        method: "POST",
        headers,
        body: JSON.stringify({ query: config.query, variables: config.variables ?? {} }),
        sensitiveHeaders: sensitiveHeaders(env, undefined, headers),
      },
      guardOptions(env),
    );
    const body = response.data;
    if (response.status >= 400) throw new StepFailure("HTTP_ERROR", httpError(response.status, response.statusText), body);
    if (!(body instanceof JsonText) || body.isArray) {
      throw new StepFailure("HTTP_ERROR", "GraphQL response is not a JSON object", body);
    }
    // Only `errors` is read out of the body, which stays text (§18.2).
    const errorsText = member(body, { kind: "key", key: "errors" });
    const errors = errorsText?.isArray ? (parse(errorsText) as unknown[]) : undefined;
    if (Array.isArray(errors) && errors.length > 0) {
      const first = (errors[0] as { message?: unknown } | null)?.message;
      const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : "";
      throw new StepFailure("HTTP_ERROR", `GraphQL error: ${typeof first === "string" ? first : JSON.stringify(errors[0])}${more}`, body);
    }
    return { data: body };
  },
});
