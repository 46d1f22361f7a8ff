/**
 * `POST /triggers:run` (API.md §17.3): what a trigger would produce, from real data, storing nothing.
 *
 * The trigger is validated as at create (§8.7 with the frequency floors): it is wrapped in a create body with one
 * placeholder node that collides with nothing sent, so the same rules report at the same `body.trigger…` paths.
 * Then, by type:
 *   manual     its data, `triggerInput` (`data`, `headers`, `pathParams`) overriding the config's;
 *   fixedTime  the output of the earliest epoch after now, and `nextFires` (the next five epochs);
 *   cron       the output of the next fire after now, and `nextFires` (five), by the §8.3.3 daylight-saving rules;
 *   block      the latest block whose number is a multiple of `interval`, as a fire on it would carry;
 *   event      the most recent log matching a query within the last `max_catchup_blocks` blocks (event-scan.ts).
 * A failed chain read answers `success: false` with `RPC_ERROR`; an event trigger with no match `NO_MATCH`.
 */
import * as v from "valibot";
import { useCaller, useOwner } from "../context";
import { validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { chainSettings, publicClient } from "../chain/chains";
import { validateDefinition } from "../workflow/definition";
import { workflowSchemas } from "../workflow/schemas";
import { blockStepOutput, triggerStepOutput } from "../execution/trigger-output";
import { latestMatchingLog } from "./event-scan";
import { FairRunQueue } from "../execution/run-queue";
import { useRuntime } from "../current-runtime";
import { cronFires } from "../workflow/chain-rules";
import { partChainId } from "../kinds/support/schema-kit";
import { type Trigger } from "../kinds/shapes";
import { triggerRunContext, type ExecutionContext } from "../execution/execution-context";

/**
 * Event scans a process runs at once (each at most 4 `eth_getLogs` in flight), served owner by owner: one owner's
 * burst of `/triggers:run` calls queues behind its own turn instead of taking the shared RPC from the watcher and
 * from other owners (API.md §18.4).
 */
const EVENT_SCAN_SLOTS = 4;
const eventScans = new FairRunQueue(() => EVENT_SCAN_SLOTS);

export interface TriggerRunResult {
  success: boolean;
  error?: string;
  errorCode?: "NO_MATCH" | "RPC_ERROR";
  output: Record<string, unknown>;
  nextFires?: number[];
  /** API.md §21.3. */
  executionContext: ExecutionContext;
}

/** How many fire instants `nextFires` lists at most. */
const NEXT_FIRES = 5;

const Envelope = v.strictObject({ trigger: v.unknown(), triggerInput: v.optional(v.unknown()) });

/** POST /triggers:run. */
export async function runTrigger(body: Record<string, unknown>): Promise<TriggerRunResult> {
  const at = useRuntime().now();
  const { trigger, chainId, triggerInput } = validate(body, at);
  return { ...(await produce(trigger, chainId, triggerInput, at)), executionContext: triggerRunContext(trigger, chainId) };
}

/** What the trigger would produce now (the answer but its context). */
async function produce(
  trigger: Trigger,
  chainId: number,
  triggerInput: Record<string, unknown> | undefined,
  at: number,
): Promise<Omit<TriggerRunResult, "executionContext">> {
  const { config } = useRuntime();
  switch (trigger.type) {
    case "manual":
      return { success: true, output: triggerStepOutput(trigger, triggerInput, at) };
    case "fixedTime":
    case "cron": {
      const fires =
        trigger.type === "fixedTime"
          ? [...new Set(trigger.config.epochs)].filter((e) => e > at).sort((a, b) => a - b)
          : cronFires(trigger.config.schedules, trigger.config.timezone ?? "UTC", at, NEXT_FIRES).map((f) => f.at);
      const nextFires = fires.slice(0, NEXT_FIRES);
      const first = nextFires[0];
      return {
        success: true,
        output: first === undefined ? { data: null } : triggerStepOutput(trigger, undefined, first),
        nextFires,
      };
    }
    case "block": {
      const client = publicClient(chainSettings(chainId));
      try {
        const head = await client.getBlockNumber({ cacheTime: 0 });
        const interval = BigInt(trigger.config.interval);
        const block = await client.getBlock({ blockNumber: (head / interval) * interval });
        return { success: true, output: blockStepOutput(block) };
      } catch {
        return rpcError(`could not read the latest block of chain ${chainId}`);
      }
    }
    case "event": {
      // In the caller's fair turn among the process's scans (time queued counts against the same deadline).
      const found = await eventScans.run(useOwner(), () =>
        latestMatchingLog(trigger.config.queries, chainId, config.limits.maxCatchupBlocks, at + config.limits.simulateTimeoutMs),
      );
      if (found.kind === "error") return rpcError(found.error);
      if (found.kind === "none") {
        return {
          success: false,
          errorCode: "NO_MATCH",
          error: `no log matched within the last ${found.blocks} blocks of chain ${chainId}`,
          output: { data: null },
        };
      }
      return { success: true, output: found.output };
    }
  }
}

const rpcError = (error: string): Omit<TriggerRunResult, "executionContext"> => ({
  success: false,
  errorCode: "RPC_ERROR",
  error,
  output: { data: null },
});

/** §8.7 as at create, for the trigger alone; `triggerInput` for manual triggers only. */
function validate(
  body: Record<string, unknown>,
  now: number,
): { trigger: Trigger; chainId: number; triggerInput?: Record<string, unknown> } {
  const { config } = useRuntime();
  const envelope = v.safeParse(Envelope, body, { abortEarly: false });
  if (!envelope.success) throw validationFailed(fieldErrors(envelope.issues, "body"));

  const { audienceChainId } = useCaller();
  const defaultChainId = config.chains.some((c) => c.chainId === audienceChainId) ? audienceChainId : config.defaultChainId;
  const sent = isObject(body.trigger) ? body.trigger : {};
  const placeholder = {
    id: unused(sent.id, "_node"),
    name: unused(sent.name, "$node"),
    type: "customCode",
    config: { source: "return null" },
  };
  const options = {
    mode: "create" as const,
    now,
    limits: config.limits,
    chains: config.chains.map((c) => ({ chainId: c.chainId, blockTimeSeconds: c.blockTimeSeconds })),
    defaultChainId,
  };
  // The shapes and rules of the trigger and of `triggerInput`, reported together.
  const inputProblems = triggerInputProblems(body.triggerInput, sent.type, config.limits);
  let validated: ReturnType<typeof validateDefinition<"create">>;
  try {
    validated = validateDefinition(
      {
        smartWalletAddress: "0x0000000000000000000000000000000000000001",
        chainId: defaultChainId,
        trigger: body.trigger,
        nodes: [placeholder],
      },
      options,
    );
  } catch (err) {
    const e = err as { code?: string; extra?: { errors?: FieldError[] } };
    if (e.code === "VALIDATION_FAILED" && inputProblems.length) throw validationFailed([...(e.extra?.errors ?? []), ...inputProblems]);
    throw err;
  }
  if (inputProblems.length) throw validationFailed(inputProblems);
  const trigger = validated.definition.trigger;
  const triggerInput = isObject(body.triggerInput) ? body.triggerInput : undefined;
  return {
    trigger,
    chainId: partChainId(trigger.config, validated.definition.chainId),
    ...(triggerInput
      ? { triggerInput: v.parse(workflowSchemas(config.limits).ManualTriggerOutput, triggerInput) as Record<string, unknown> }
      : {}),
  };
}

function triggerInputProblems(input: unknown, type: unknown, limits: Parameters<typeof workflowSchemas>[0]): FieldError[] {
  if (input === undefined || input === null) return [];
  if (type !== "manual") return [{ path: "body.triggerInput", message: "is allowed only for manual triggers" }];
  const parsed = v.safeParse(workflowSchemas(limits).ManualTriggerOutput, input, { abortEarly: false });
  return parsed.success
    ? []
    : fieldErrors(parsed.issues, "body").map((e) => ({ ...e, path: e.path.replace(/^body/, "body.triggerInput") }));
}

/** `base`, or `base` with a number, unlike `taken`. */
function unused(taken: unknown, base: string): string {
  let candidate = base;
  for (let n = 1; candidate === taken; n++) candidate = `${base}${n}`;
  return candidate;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
