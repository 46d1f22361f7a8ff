/**
 * A wait kind is one handler (shared/execution/wait-kinds.ts): the internal `timer` kind, emitted here by a node
 * kind defined in the test, suspends a run like an await node's wait, is not shown in `waitingFor`, and at its
 * deadline the sweeper's pass over due waits ends it (its step a success) and hands the run over for resuming,
 * as it does a signal or chain-event wait; the resumed run goes on downstream from its sealed state.
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as v from "valibot";
import { ulid } from "ulid";
import { useTestRuntime } from "../support/runtime";
import { defineNode, nodeShape } from "../../shared/kinds/kind";
import { kinds } from "../../shared/kinds/kinds";
import { withKinds } from "../../shared/kinds/registry";
import { strict } from "../../shared/kinds/support/schema-kit";
import { validateDefinition } from "../../shared/workflow/definition";
import { runWorkflow } from "../../shared/engine/run";
import type { RunInput } from "../../shared/engine/types";
import { setBus } from "../../shared/execution/bus/install";
import { type BusEvent } from "../../shared/execution/bus/event-bus";
import { endedWaits, loadState, waitHost } from "../../shared/execution/waits";
import { waitingForOf } from "../../shared/execution/waiting-for";
import { runMaintenance } from "../../shared/execution/maintenance";
import { recordedSteps } from "../../shared/execution/execution-read";
import { getExecution, openWaitsOf, pendingExecutionItem, putClaimedExecution, resumeRun } from "../../shared/store/entities/execution";
import { useRuntime } from "../../shared/current-runtime";

const PAUSE_MS = 60_000;
const OWNER = "0x00000000000000000000000000000000000000b2";

/** `pause`: waits on a timer of PAUSE_MS; `after`: answers "done". Neither is a kind of the service's. */
const pause = defineNode(
  nodeShape({ type: "pause", doc: "Waits a minute.", config: () => strict({}), writesOnChain: false, waits: true }),
  {
    cutOff: "RPC_ERROR",
    run: async (_config, env) => ({ suspend: { kind: "timer", since: env.now(), deadline: env.now() + PAUSE_MS } }),
  },
);
const after = defineNode(
  nodeShape({ type: "after", doc: "Answers done.", config: () => strict({ word: v.string() }), writesOnChain: false }),
  {
    cutOff: "RPC_ERROR",
    run: async (config) => ({ data: config.word }),
  },
);
const registry = withKinds(kinds, { nodes: [pause, after] });

const published: BusEvent[] = [];

beforeAll(async () => {
  await useTestRuntime();
  setBus({ publish: async (event) => void published.push(event), subscribe: () => () => undefined });
});

describe("a timer wait", () => {
  it("suspends the run unseen, and at its deadline the sweeper ends it and hands the run over; resumed, it goes on", async () => {
    const { config, now } = useRuntime();
    const { definition, graph } = validateDefinition(
      {
        chainId: 31337,
        trigger: { id: "go", name: "go", type: "manual", config: { data: {} } },
        nodes: [
          { id: "p", name: "p", type: "pause", config: {} },
          { id: "a", name: "a", type: "after", config: { word: "done" } },
        ],
        edges: [
          { id: "e0", source: "go", target: "p" },
          { id: "e1", source: "p", target: "a" },
        ],
        inputVariables: {},
      },
      {
        mode: "simulate",
        now: now(),
        limits: config.limits,
        chains: config.chains,
        defaultChainId: config.defaultChainId,
        kinds: registry,
      },
    );
    const key = { workflowId: ulid(), id: ulid() };
    const startAt = now();
    await putClaimedExecution(pendingExecutionItem({ ...key, owner: OWNER, startAt, index: 0, status: "pending", chainId: 31337 }));
    const nodes = new Map(definition.nodes.map((n, i) => [n.id, { type: n.type, name: n.name, position: i, config: n.config }]));
    const input = (pass: { startedAt: number; pendingMsBefore: number }): RunInput => ({
      mode: "run",
      definition,
      graph: graph!,
      kinds: registry,
      context: { workflowId: key.workflowId, executionId: key.id, executionIndex: 0, owner: OWNER, chainId: 31337 },
      triggerOutput: { data: {} },
      startAt,
      secrets: async () => ({}),
      waits: waitHost({ ...key, owner: OWNER }, nodes, pass),
    });

    const first = await runWorkflow(input({ startedAt: startAt, pendingMsBefore: 0 }));
    expect(first.status).toBe("waiting");
    const waiting = (await getExecution(key))!;
    expect(waiting.status).toBe("waiting");
    expect([...openWaitsOf(waiting).keys()]).toEqual(["p"]);
    expect(waitingForOf(waiting)).toBeUndefined(); // internal: not on the wire
    const deadline = Number(openWaitsOf(waiting).get("p")!.deadline);
    expect(deadline).toBeGreaterThanOrEqual(startAt + PAUSE_MS);

    // Before its deadline the sweeper leaves it; at its deadline it ends it and hands the run over.
    expect((await runMaintenance({ now: deadline - 1, passes: ["resumedWaits"] })).results.resumedWaits).toBe(0);
    expect(published).toEqual([]);
    useRuntime().now = () => deadline;
    expect((await runMaintenance({ now: deadline, passes: ["resumedWaits"] })).results.resumedWaits).toBe(1);
    expect(published).toMatchObject([{ type: "execution.requested", workflowId: key.workflowId, executionId: key.id, resume: true }]);

    // The runner's resume: the state taken, the ended wait's step read, the run driven on from there.
    const handed = published[0]!;
    const resumed = (await resumeRun(key, handed.from!.generation, deadline, deadline - handed.from!.pendingMs))!;
    expect(resumed.status).toBe("pending");
    const ended = await endedWaits(resumed, ["p"]);
    expect(ended).toMatchObject([{ nodeId: "p", success: true, output: { data: { at: deadline } } }]);
    expect(await recordedSteps(key.id, ["p"])).toMatchObject([{ id: "p", type: "pause", success: true, endAt: deadline }]);
    const second = await runWorkflow({
      ...input({ startedAt: deadline, pendingMsBefore: handed.from!.pendingMs }),
      resume: { snapshot: await loadState(resumed), ended },
    });
    expect(second.status).toBe("success");
    expect(second.steps.find((s) => s.id === "a")).toMatchObject({ success: true, output: { data: "done" } });
  });
});
