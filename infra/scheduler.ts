// Time triggers in AWS (shared/schedule/aws.ts): EventBridge Scheduler schedules in this stage's group invoke the
// schedule function (functions/schedule.ts) through a role that may do exactly that and write to the dead-letter
// queue. Schedules retry for as long as a fire may still run late (missed_fire_grace_ms, 15 min); what is still
// undelivered then lands in the queue for an operator. The workflows function (create, resume, pause, cancel) and
// the schedule function (refreshing one-time windows, removing finished workflows) manage the schedules:
// `schedulerEnvironment` and `schedulerPermissions` are what each of them needs.
import { table } from "./table";
import { controllerKey, secretsKey } from "./keys";
import { jwtSigningKey, chains } from "./secrets";
import { bus } from "./bus";

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

/** What shared/schedule/aws.ts `eventBridgeSchedulerFromEnvironment` reads. */
export const schedulerEnvironment = {
  SCHEDULE_GROUP: scheduleGroup.name,
  SCHEDULE_TARGET_ARN: targetArn,
  SCHEDULER_ROLE_ARN: schedulerRole.arn,
  SCHEDULE_DEAD_LETTER_ARN: scheduleDeadLetters.arn,
};

/** Managing this group's schedules, and handing the scheduler its role. */
export const schedulerPermissions = [
  {
    actions: ["scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule"],
    resources: [$interpolate`arn:${partition}:scheduler:${region}:${account}:schedule/${scheduleGroup.name}/*`],
  },
  { actions: ["scheduler:ListSchedules"], resources: ["*"] },
  { actions: ["iam:PassRole"], resources: [schedulerRole.arn] },
];

export const scheduleTarget = new sst.aws.Function("ScheduleTarget", {
  handler: "functions/schedule.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  memory: "512 MB",
  timeout: "1 minute",
  link: [table, jwtSigningKey, bus, scheduleDeadLetters],
  environment: {
    SECRETS_KMS_KEY_ID: secretsKey.arn,
    CONTROLLER_KMS_KEY_ID: controllerKey.arn,
    CHAINS: chains.value,
    ...schedulerEnvironment,
  },
  // Claims and publishes; it never decrypts or signs, but shares the runtime's configuration (key ids).
  permissions: schedulerPermissions,
  transform: {
    function: (args) => {
      args.name = targetName;
      // Lambda's own retries of a failed asynchronous invocation end in the same queue.
      args.deadLetterConfig = { targetArn: scheduleDeadLetters.arn };
    },
  },
});
