// Time triggers in AWS (shared/workflow/scheduler/eventbridge.ts): EventBridge Scheduler schedules in this stage's group invoke the
// schedule function (functions/schedule.ts) through a role that may do exactly that and write to the dead-letter
// queue. Schedules retry for as long as a fire may still run late (missed_fire_grace_ms, 15 min); what is still
// undelivered then lands in the queue for an operator. Every function whose code starts or stops a workflow's
// firing gets `schedulerEnvironment` (without it shared/service/wire-aws.ts falls back to the local scheduler,
// whose schedules nothing reads): the workflows group (create, resume, pause, cancel, delete) and the schedule
// function (refreshing one-time windows) start and stop them; the runner, the sweeper and the watcher, which
// complete workflows (error limit, expiry, maxExecution reached by a fire), stop them.
import { table } from "./table";
import { keyEnvironment } from "./kms";
import { chains } from "./secrets";
import { runnerQueue } from "./bus";

const region = aws.getRegionOutput().name;
const account = aws.getCallerIdentityOutput().accountId;
const partition = aws.getPartitionOutput().partition;

export const scheduleGroup = new aws.scheduler.ScheduleGroup("Schedules", { name: `${$app.name}-${$app.stage}` });

export const scheduleDeadLetters = new sst.aws.Queue("ScheduleDeadLetters", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

// A fixed name, so the function's ARN is known before it exists (its own environment carries it).
const targetName = `${$app.name}-${$app.stage}-schedule-target`;
const targetArn = $interpolate`arn:${partition}:lambda:${region}:${account}:function:${targetName}`;

export const schedulerRole = new aws.iam.Role("SchedulerRole", {
  assumeRolePolicy: $jsonStringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Service: "scheduler.amazonaws.com" },
        Action: "sts:AssumeRole",
        Condition: { StringEquals: { "aws:SourceAccount": account } },
      },
    ],
  }),
});

new aws.iam.RolePolicy("SchedulerInvokesTarget", {
  role: schedulerRole.id,
  policy: $jsonStringify({
    Version: "2012-10-17",
    Statement: [
      { Effect: "Allow", Action: "lambda:InvokeFunction", Resource: [targetArn, $interpolate`${targetArn}:*`] },
      { Effect: "Allow", Action: "sqs:SendMessage", Resource: scheduleDeadLetters.arn },
    ],
  }),
});

/** What shared/workflow/scheduler/eventbridge.ts `eventBridgeSchedulerFromEnvironment` reads. */
export const schedulerEnvironment = {
  SCHEDULE_GROUP: scheduleGroup.name,
  SCHEDULE_TARGET_ARN: targetArn,
  SCHEDULER_ROLE_ARN: schedulerRole.arn,
  SCHEDULE_DEAD_LETTER_ARN: scheduleDeadLetters.arn,
};

const schedules = $interpolate`arn:${partition}:scheduler:${region}:${account}:schedule/${scheduleGroup.name}/*`;
// ListSchedules takes no resource; the adapter always names this stage's group.
const list = { actions: ["scheduler:ListSchedules"], resources: ["*"] };

/** The adapter's calls: `remove` lists and deletes; `ensure` also creates, handing the scheduler its role. */
export const schedulerPermissions = {
  stop: [list, { actions: ["scheduler:DeleteSchedule"], resources: [schedules] }],
  manage: [
    list,
    { actions: ["scheduler:CreateSchedule", "scheduler:DeleteSchedule"], resources: [schedules] },
    { actions: ["iam:PassRole"], resources: [schedulerRole.arn] },
  ],
};

export const scheduleTarget = new sst.aws.Function("ScheduleTarget", {
  handler: "functions/schedule.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  memory: "512 MB",
  timeout: "1 minute",
  // Claims and publishes; it never decrypts or signs, but the runtime's configuration names the keys.
  link: [table, chains, runnerQueue],
  environment: { ...keyEnvironment, ...schedulerEnvironment },
  permissions: [
    ...schedulerPermissions.manage,
    // Lambda's own retries of a failed asynchronous invocation end in the same queue.
    { actions: ["sqs:SendMessage"], resources: [scheduleDeadLetters.arn] },
  ],
  transform: {
    function: (args) => {
      args.name = targetName;
      args.deadLetterConfig = { targetArn: scheduleDeadLetters.arn };
    },
  },
});
