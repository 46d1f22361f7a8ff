/**
 * Counts that operators alarm on, written as CloudWatch Embedded Metric Format: one JSON line per event on stdout,
 * which CloudWatch Logs turns into a metric of the stage's namespace without an API call. Only the AWS host turns
 * them on (`emitMetrics`, shared/service/wire-aws.ts); `npm start` and the tests write none.
 *
 * Dimensions are few and bounded (a status, a reason code): never an owner, a workflow or an address.
 */

let namespace: string | undefined;

/** Starts writing metrics under `ns` (infra/operations.ts names it per stage, `METRICS_NAMESPACE`). */
export function emitMetrics(ns: string | undefined): void {
  namespace = ns;
}

/** One occurrence of `name` with these dimensions, e.g. `countMetric("Executions", { Status: "success" })`. */
export function countMetric(name: string, dimensions: Record<string, string> = {}): void {
  if (!namespace) return;
  const line = {
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [{ Namespace: namespace, Dimensions: [Object.keys(dimensions)], Metrics: [{ Name: name, Unit: "Count" }] }],
    },
    ...dimensions,
    [name]: 1,
  };
  process.stdout.write(JSON.stringify(line) + "\n");
}
