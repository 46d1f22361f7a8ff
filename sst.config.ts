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
    const { table } = await import("./infra/table");
    const { secretsKey, controllerKey } = await import("./infra/keys");
    await import("./infra/secrets");
    const { api } = await import("./infra/api");
    const { bus } = await import("./infra/bus");
    const { stream } = await import("./infra/stream");
    await import("./infra/watcher");
    await import("./infra/scheduler");
    return {
      api: api.url,
      bus: bus.name,
      stream: stream.url,
      table: table.name,
      secretsKey: secretsKey.arn,
      controllerKey: controllerKey.arn,
    };
  },
});
