/**
 * await (API.md §17.1): the run waits here, holding no process, until a signal (`channel: "api"`, `POST
 * /executions/{id}:signal` by the owner or a listed approver) or the first log matching `chainEvent` mined after the
 * wait began, or its deadline (`timeoutSeconds`, then the step fails AWAIT_TIMEOUT). In a run the kind answers a
 * suspension: the engine keeps the node open and the execution records the wait (shared/execution/waits.ts ends
 * it). `:simulate` does not wait: the node is approved at once by the caller.
 */
import * as v from "valibot";
import { defineNode, nodeShape, StepFailure, type NodeEnv, type Raw } from "../kind";
import { RenderedTooLargeError } from "../../templates";
import { EventQuery } from "../support/event-query";
import { chainClient, read } from "../support/chain";
import { ChainId, int, list, opt, str, strict } from "../support/schema-kit";
import { AddressString } from "../../http/address-schemas";

/** `max_await_timeout_s` (§17.5). */
const MAX_AWAIT_TIMEOUT_S = 604_800;
const DEFAULT_TIMEOUT_S = 86_400;
/**
 * The prompt after template expansion, in UTF-8 bytes: it rides on the execution item in `waitingFor` (up to
 * 10 waits), which must stay well inside DynamoDB's 400 KB item.
 */
const MAX_RENDERED_PROMPT_BYTES = 4_096;

const config = strict(
  {
    channel: opt(v.pipe(str(), v.description("`api`: the run waits for `POST /executions/{id}:signal`. Any other value is refused."))),
    chainEvent: opt(
      strict(
        { queries: list(EventQuery, 1, 10, "queries"), chainId: opt(ChainId) },
        "An event query as in the event trigger (no `cooldownSeconds`): the first matching log mined after the wait began ends it.",
      ),
    ),
    approvers: opt(
      v.pipe(list(AddressString, 0, 10, "approvers"), v.description("Addresses that may signal besides the owner. Only with `channel`.")),
    ),
    prompt: opt(
      v.pipe(
        str(),
        v.maxLength(2000, "must be at most 2000 characters"),
        v.description(
          `Shown in \`waitingFor\`; templates expanded when the wait begins, to at most ${MAX_RENDERED_PROMPT_BYTES} bytes (past that the step fails \`INVALID_INPUT\`).`,
        ),
      ),
    ),
    timeoutSeconds: opt(int(60, MAX_AWAIT_TIMEOUT_S), DEFAULT_TIMEOUT_S),
  },
  "await. Exactly one of `channel` and `chainEvent`.",
);
type Config = v.InferOutput<typeof config>;

export const awaitShape = nodeShape({
  type: "await",
  doc: "Waits for a signal (approve or reject) or a chain event, at most `timeoutSeconds`; the run holds nothing meanwhile.",
  config: () => config,
  writesOnChain: false,
  waits: true,
  maxPerWorkflow: 10,
  nestedChainIds: (config) => {
    const event = config.chainEvent as Raw | undefined;
    return event && typeof event === "object" ? [{ path: "chainEvent.chainId", chainId: event.chainId }] : [];
  },
});

export const awaitNode = /* @__PURE__ */ defineNode(awaitShape, {
  problems(config: Raw, at, add) {
    const hasChannel = config.channel !== undefined && config.channel !== null;
    const hasEvent = config.chainEvent !== undefined && config.chainEvent !== null;
    if (hasChannel === hasEvent) add(at, "must set exactly one of channel and chainEvent");
    if (hasChannel && typeof config.channel === "string" && config.channel !== "api") add(`${at}.channel`, "channel not supported");
    if (hasEvent && Array.isArray(config.approvers) && config.approvers.length > 0) add(`${at}.approvers`, "is allowed only with channel");
  },
  cutOff: "AWAIT_TIMEOUT",
  run: async (stored: Config, env) => {
    const at = env.now();
    if (env.mode === "simulate") {
      return {
        data: { decision: "approve", payload: null, signer: env.caller ?? null, at },
        log: "simulated: approved at once by the caller (a run would wait for a signal or its chain event)",
      };
    }
    const prompt = stored.prompt !== undefined ? renderPrompt(stored.prompt, env) : undefined;
    const deadline = at + stored.timeoutSeconds * 1000;
    if (stored.chainEvent) {
      const chainId = stored.chainEvent.chainId || env.chainId;
      // Logs count from the block after the head at the wait's start: "mined after the wait began". Read fresh:
      // viem caches the block number per client for its polling interval, and a head seconds old would let a
      // log mined just before the wait began end it.
      const afterBlock = Number(await read("the latest block number", () => chainClient(chainId).getBlockNumber({ cacheTime: 0 })));
      return {
        suspend: {
          kind: "chainEvent",
          since: at,
          deadline,
          ...(prompt !== undefined ? { prompt } : {}),
          chainId,
          query: stored.chainEvent.queries,
          afterBlock,
        },
      };
    }
    return {
      suspend: {
        kind: "signal",
        since: at,
        deadline,
        ...(prompt !== undefined ? { prompt } : {}),
        approvers: stored.approvers ?? [],
      },
    };
  },
});

function renderPrompt(prompt: string, env: NodeEnv): string {
  try {
    return env.renderText(prompt, { maxBytes: MAX_RENDERED_PROMPT_BYTES });
  } catch (err) {
    if (!(err instanceof RenderedTooLargeError)) throw err;
    throw new StepFailure("INVALID_INPUT", `prompt after template expansion exceeds ${MAX_RENDERED_PROMPT_BYTES} bytes`);
  }
}
