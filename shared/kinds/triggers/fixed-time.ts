/** fixedTime (API.md §8.3.2): fires once at each epoch (TimeMs). Step output: `{timestamp, timestampIso}`. */
import { TimeMs, list, strict } from "../support/schema-kit";
import { defineTrigger, triggerShape } from "../kind";

export const fixedTimeShape = triggerShape({
  type: "fixedTime",
  doc: "Fires once at each listed epoch; output {timestamp, timestampIso}.",
  config: () =>
    strict(
      { epochs: list(TimeMs, 1, 1000) },
      "fixedTime trigger. At create at least one epoch must be after now and inside [startAt, expiredAt) when those are set.",
    ),
});

export const fixedTime = /* @__PURE__ */ defineTrigger(fixedTimeShape, {
  createProblems(config, { now, startAt, expiredAt }, at, add) {
    if (!Array.isArray(config.epochs)) return;
    const epochs = config.epochs.filter((e): e is number => typeof e === "number");
    const inside = epochs.some((e) => e > now && (startAt === undefined || e >= startAt) && (expiredAt === undefined || e < expiredAt));
    if (epochs.length === config.epochs.length && epochs.length > 0 && !inside) {
      add(`${at}.epochs`, "must include an epoch after now and inside [startAt, expiredAt)");
    }
  },
});
