// The event bus (shared/execution/bus/): `:trigger` (and the automatic fires) publish `execution.requested`;
// a rule on the app's bus puts it in the runner queue, which the runner function consumes (infra/runner.ts).
export const bus = new sst.aws.Bus("Bus");

// What linking the bus grants (SST's own link grants `events:*`): publishing on it. Functions read `Resource.Bus.name`.
sst.Linkable.wrap(sst.aws.Bus, (b) => ({
  properties: { name: b.name, arn: b.arn },
  include: [sst.aws.permission({ actions: ["events:PutEvents"], resources: [b.arn] })],
}));
