/// <reference path="./.sst/platform/config.d.ts" />

// App settings only; each concern's resources live in infra/<concern>.ts.
export default $config({
  app(input) {
    return {
      name: "workflow-automation",
      removal: input?.stage === "production" ? "retain" : "remove",
      protect: input?.stage === "production",
      home: "aws",
      // Pinned: `sst install` (CI, `npm run typecheck`) fetches exactly this provider, and tests/infra runs against it.
      providers: { aws: { version: "6.66.2" } },
    };
  },
  async run() {
    // First: what every function gets (tracing, the metrics namespace), whichever file defines it.
    await import("./infra/tracing");
    const { table } = await import("./infra/table");
    const { secretsKey, controllerKeyArn, tokenKey } = await import("./infra/kms");
    await import("./infra/secrets");
    const { runnerQueue } = await import("./infra/bus");
    await import("./infra/scheduler");
    await import("./infra/runner");
    const { api } = await import("./infra/api");
    const { stream } = await import("./infra/stream");
    const { router } = await import("./infra/router");
    await import("./infra/key-policies");
    await import("./infra/watcher");
    await import("./infra/sweeper");
    const { alarmTopic } = await import("./infra/alarms");
    return {
      // The one public base URL: every route, the stream included (infra/router.ts).
      url: router.url,
      // The origins behind it, for operators (a client uses `url`).
      api: api.url,
      stream: stream.url,
      runnerQueue: runnerQueue.url,
      table: table.name,
      secretsKey: secretsKey.arn,
      controllerKey: controllerKeyArn,
      tokenKey: tokenKey.arn,
      // Subscribe an operator's address to it once (docs/deploy.md, "Runbook").
      alarms: alarmTopic.arn,
    };
  },
});
