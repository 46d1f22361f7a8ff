/**
 * The AWS host's wiring: every Lambda entry point (functions/*) calls `wireAws(...)` once, at import, naming the
 * ports its group uses. It installs the runtime (settings from the environment, with the SST-linked resources
 * filled in: infra/ links each function only what it uses), the answer envelope, and each port named. The ports
 * are named rather than all installed so that a function bundles only the adapters it uses: an installer a
 * function does not name is dropped from its bundle, and the scheduler's, whose adapters bring the fire and
 * croner, lives in a module of its own (./wire-aws-scheduler.ts) that only the functions naming it import
 * (tests/functions/bundles.test.ts: the secrets function carries no SQS client and no croner). The local host's
 * wiring is ./wire-local.ts.
 */
import type { Context } from "aws-lambda";
import { Resource } from "sst";
import { inInvocation, setLogLevel } from "../log";
import { emitMetrics } from "../metrics";
import { buildConfig } from "../config";
import { createRuntime } from "../runtime";
import { setAnswerEnvelope } from "../http/answer-bytes";
import { setBus } from "../execution/bus/install";
import { createSqsBus } from "../execution/bus/sqs-publisher";
import { setRuntime, useConfig } from "../current-runtime";
import { setTokenSigner } from "../http/token";
import { kmsTokenSigner } from "../envelope/kms-token-signer";
import { useKms } from "../envelope/kms";

/** The resources infra/ links (SST's generated sst-env.d.ts declares them the same way); each function reads only its own. */
declare module "sst" {
  export interface Resource {
    Table: { name: string };
    Chains: { value: string };
    RunnerQueue: { url: string };
  }
}
const linked = Resource;

/** Installs one port's AWS adapter. */
export type Port = () => void;

/** The event bus: SendMessage to the runner queue, in the run's owner's message group (infra/bus.ts). */
export const awsBus: Port = () => void setBus(createSqsBus({ queueUrl: linked.RunnerQueue.url }));

/**
 * The token signer: the stage's KMS token key (JWT_KMS_KEY_ID, infra/kms.ts), which only the sign-in function may
 * sign with. Without the setting (a Lambda test against the local stack) the configured local key signs.
 */
export const awsTokenSigner: Port = () => {
  const keyId = useConfig().jwtKmsKeyId;
  if (keyId) setTokenSigner(kmsTokenSigner(useKms(), keyId));
};

/** The cold-start setup of a Lambda instance: the runtime and its log level, the answer envelope, then the ports named. */
export function wireAws(...ports: Port[]): void {
  const { config } = setRuntime(
    createRuntime({
      config: buildConfig({
        ...process.env,
        TABLE_NAME: linked.Table.name,
        // A secret linked into the bundle (encrypted), never a plaintext variable.
        ...("Chains" in Resource ? { CHAINS: linked.Chains.value } : {}),
      }),
    }),
  );
  setLogLevel(config.logLevel);
  // Answers go out inside the invocation's response envelope, which escapes the body again (page and record budgets).
  setAnswerEnvelope("lambda");
  emitMetrics(process.env.METRICS_NAMESPACE);
  for (const install of ports) install();
}

/** A Lambda handler whose log lines, all of them, carry its invocation's `awsRequestId` (HTTP: functions/viewer.ts). */
export function invocation<E, R>(handler: (event: E, context: Context) => Promise<R>): (event: E, context: Context) => Promise<R> {
  return (event, context) => inInvocation(context?.awsRequestId, () => handler(event, context));
}
