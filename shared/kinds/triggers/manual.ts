/**
 * manual (API.md §8.3.1): fires only on `POST /workflows/{id}:trigger`. Step output: `{data, headers,
 * pathParams}` (each the request's `triggerOutput` member, else the config's value).
 */
import * as v from "valibot";
import { opt, str, strict, stringMap, utf8Bytes, type DefinitionLimits } from "../support/schema-kit";
import { defineTrigger, triggerShape } from "../kind";

/** Manual `data`: any JSON of at most `maxManualDataBytes` serialized (the config's and a run's alike). */
export const manualData = (limits: DefinitionLimits) =>
  v.pipe(
    v.unknown(),
    v.check((data) => utf8Bytes(data) <= limits.maxManualDataBytes, `must be at most ${limits.maxManualDataBytes} bytes serialized`),
    v.description(`Any JSON, at most ${limits.maxManualDataBytes} bytes serialized.`),
  );

const config = ({ limits }: { limits: DefinitionLimits }) =>
  strict(
    {
      data: opt(manualData(limits)),
      headers: opt(stringMap(str("must be a string"), 50)),
      pathParams: opt(stringMap(str("must be a string"), 50)),
      lang: opt(v.picklist(["json", "javascript"], "must be json or javascript"), "json"),
    },
    "manual trigger. With `lang` javascript, `data` must be a string (source text, never evaluated).",
  );

export const manualShape = triggerShape({
  type: "manual",
  doc: "Fires on POST /workflows/{id}:trigger; output {data, headers, pathParams}.",
  config,
});

export const manual = /* @__PURE__ */ defineTrigger(manualShape, {
  problems(config, at, add) {
    const present = config.data !== undefined && config.data !== null;
    if (config.lang === "javascript" && present && typeof config.data !== "string") {
      add(`${at}.data`, "must be a string (the source text) when lang is javascript");
    }
  },
});
