/**
 * The sandbox port on AWS: the functions that run workflows (the runner; workflows: blocking triggers,
 * :simulate, nodes:run) evaluate JavaScript by invoking the sandbox function (infra/sandbox.ts, whose role
 * grants nothing but logs) instead of on worker threads of their own, which would run scripts next to their
 * table access, keys and credentials. A module of its own, like ./wire-aws-scheduler.ts, so that only the
 * functions naming it bundle the invoker. infra/sandbox.ts sets SANDBOX_FUNCTION (`name` or `name:version`).
 */
import type { Port } from "./wire-aws";
import { setSandbox } from "../sandbox/port";
import { RemoteSandbox } from "../sandbox/remote";
import { invokeLambda } from "../sandbox/lambda-invoke";

export const awsSandbox: Port = () => {
  const [functionName, qualifier] = (process.env.SANDBOX_FUNCTION ?? "").split(":");
  if (!functionName) throw new Error("SANDBOX_FUNCTION is not set: infra/sandbox.ts gives it to the functions that run scripts");
  const region = process.env.AWS_REGION ?? "us-east-1";
  const target = { functionName, region, ...(qualifier ? { qualifier } : {}) };
  setSandbox(new RemoteSandbox((payload, signal) => invokeLambda(target, payload, signal)));
};
