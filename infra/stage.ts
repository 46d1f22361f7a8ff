// What kind of stage this is. `production` is the one stage that owns its controller key, keeps its data and
// keys when removed, and must name the sign-in URIs it accepts; every other stage is a preview (docs/deploy.md).
export const production = $app.stage === "production";

/** Where the functions' own metrics go (shared/metrics.ts) and what infra/alarms.ts alarms on. */
export const metricsNamespace = `${$app.name}/${$app.stage}`;
