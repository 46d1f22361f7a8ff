// What every function of the stage gets, whoever defines it (imported first by sst.config.ts, so the transform
// meets every function, those inside Cron and Bus subscribers included): active X-Ray tracing with the managed
// policy that lets it write segments, and the namespace its business metrics are written under (shared/metrics.ts,
// alarmed on in infra/alarms.ts).
import { metricsNamespace } from "./stage";

const partition = aws.getPartitionOutput().partition;
const XRAY_WRITE = $interpolate`arn:${partition}:iam::aws:policy/AWSXRayDaemonWriteAccess`;

$transform(sst.aws.Function, (args) => {
  args.environment = $output(args.environment ?? {}).apply((environment) => ({ ...environment, METRICS_NAMESPACE: metricsNamespace }));
  args.policies = $output(args.policies ?? []).apply((policies) => XRAY_WRITE.apply((xray) => [...policies, xray]));
  const own = args.transform?.function;
  args.transform = {
    ...args.transform,
    function: (fn, opts, name) => {
      fn.tracingConfig = { mode: "Active" };
      if (typeof own === "function") own(fn, opts, name);
      else if (own) Object.assign(fn, own);
    },
  };
});
