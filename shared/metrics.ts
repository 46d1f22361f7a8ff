/**
 * Counts and gauges that operators alarm on, written as CloudWatch Embedded Metric Format: one JSON line per event
 * on stdout, which CloudWatch Logs turns into metrics of the stage's namespace without an API call. Only the AWS
 * host turns them on (`emitMetrics`, shared/service/wire-aws.ts); `npm start` and the tests write none.
 *
 * Each value is recorded twice: stage-wide (no dimension) and by its dimensions, so an alarm can watch the whole
 * stage and a dashboard can split it. Dimensions are few and bounded (a status, a reason code, a chain id): never
 * an owner, a workflow or an address.
 */

let namespace: string | undefined;

/** Starts writing metrics under `ns` (infra/stage.ts names it per stage, `METRICS_NAMESPACE`). */
export function emitMetrics(ns: string | undefined): void {
  namespace = ns;
}

type Unit = "Count" | "None" | "Milliseconds";

function record(name: string, value: number, unit: Unit, dimensions: Record<string, string>): void {
  if (!namespace) return;
  const keys = Object.keys(dimensions);
  const line = {
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [{ Namespace: namespace, Dimensions: keys.length ? [[], keys] : [[]], Metrics: [{ Name: name, Unit: unit }] }],
    },
    ...dimensions,
    [name]: value,
  };
  process.stdout.write(JSON.stringify(line) + "\n");
}

/** One occurrence of `name`, e.g. `countMetric("Executions", { Status: "success" })`. */
export const countMetric = (name: string, dimensions: Record<string, string> = {}) => record(name, 1, "Count", dimensions);

/** A level measured now, e.g. `gaugeMetric("WatcherLagBlocks", 12, { ChainId: "1" })`. */
export const gaugeMetric = (name: string, value: number, dimensions: Record<string, string> = {}) =>
  record(name, value, "None", dimensions);
