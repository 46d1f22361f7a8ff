/**
 * Adding a node kind is one file plus its registry lines (issue 18): a kind defined here, in the test, and
 * added with `withKinds`, is validated like the service's own (its schema and its cross-field rule), appears in
 * an OpenAPI document built from it, runs in the engine with templates resolved, and is priced by fees.
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as v from "valibot";
import { useTestRuntime } from "../support/runtime";
import { buildRegistry, withKinds } from "../../shared/kinds/registry";
import { defineNode, nodeShape } from "../../shared/kinds/kind";
import { kinds } from "../../shared/kinds/kinds";
import { shapes } from "../../shared/kinds/shapes";
import { strict } from "../../shared/kinds/support/schema-kit";
import { validateDefinition } from "../../shared/workflow/definition";
import { workflowSchemas } from "../../shared/workflow/schemas";
import { runWorkflow } from "../../shared/engine/run";
import { estimateFees } from "../../shared/engine/fees";
import { buildDocument } from "../../shared/service/openapi";
import { component, endpoint, group } from "../../shared/http/endpoint";
import { ApiError } from "../../shared/errors";
import { useRuntime } from "../../shared/current-runtime";

/** `stamp`: writes `times` copies of `text` (a template); a pretend write, priced at 33,000 gas. */
const config = strict({ text: v.string(), times: v.pipe(v.number(), v.integer(), v.minValue(1)) });
const stampShape = nodeShape({ type: "stamp", doc: "Repeats a text.", config: () => config, writesOnChain: true });
const stamp = defineNode(stampShape, {
  problems: (config, at, add) => {
    if (config.times === 13) add(`${at}.times`, "must not be 13");
  },
  fee: (config) => ({ fallbackGas: 33_000n, calls: undefined, chainConfig: config }),
  cutOff: "RPC_ERROR",
  run: async (config, env) => {
    const { text } = env.render(config);
    return { data: Array.from({ length: config.times }, () => text).join(" ") };
  },
});
const registry = withKinds(kinds, { nodes: [stamp] });

const RUNNER = "0x00000000000000000000000000000000000000a1";

function definitionOf(times: number, mode: "simulate" | "estimateFees" = "simulate") {
  const { config, now } = useRuntime();
  return validateDefinition(
    {
      chainId: 31337,
      trigger: { name: "go", type: "manual", config: { data: { word: "hey" } } },
      nodes: [{ id: "s", name: "s", type: "stamp", config: { text: "{{go.data.word}}", times } }],
      inputVariables: { settings: { runner: RUNNER } },
      ...(mode === "estimateFees" ? { createdAt: now(), expireAt: now() + 3_600_000, maxExecution: 1 } : {}),
    },
    { mode, now: now(), limits: config.limits, chains: config.chains, defaultChainId: config.defaultChainId, kinds: registry },
  );
}

beforeAll(() => useTestRuntime());

describe("a kind defined in a test", () => {
  it("leaves the service's registry as it was", () => {
    expect(kinds.nodeTypes).not.toContain("stamp");
    expect(shapes.nodeTypes).not.toContain("stamp");
    expect(registry.nodeTypes.at(-1)).toBe("stamp");
  });

  it("a registry whose kinds are not the ones defined from the listed shapes is refused", () => {
    expect(() => buildRegistry({ nodes: [...kinds.nodes, stamp], triggers: kinds.triggers }, shapes)).toThrow(/listed shapes/);
    expect(() => buildRegistry({ nodes: [...kinds.nodes].reverse(), triggers: kinds.triggers }, shapes)).toThrow(/listed shapes/);
    expect(buildRegistry({ nodes: kinds.nodes, triggers: kinds.triggers }, shapes).nodeTypes).toEqual(shapes.nodeTypes);
  });

  it("validates: its schema and its rule report like the service's kinds, and the service's registry refuses it", () => {
    expect(definitionOf(2).definition.nodes[0]).toEqual({
      id: "s",
      name: "s",
      type: "stamp",
      config: { text: "{{go.data.word}}", times: 2 },
    });
    const fields = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return (error as ApiError).extra.errors?.map((f) => f.path);
      }
      return [];
    };
    expect(fields(() => definitionOf(0))).toEqual(["body.nodes[0].config.times"]);
    expect(fields(() => definitionOf(13))).toEqual(["body.nodes[0].config.times"]);
    const { config, now } = useRuntime();
    const body = {
      chainId: 31337,
      trigger: { name: "go", type: "manual", config: {} },
      nodes: [{ id: "s", name: "s", type: "stamp", config: {} }],
    };
    const options = {
      mode: "simulate" as const,
      now: now(),
      limits: config.limits,
      chains: config.chains,
      defaultChainId: config.defaultChainId,
    };
    expect(fields(() => validateDefinition(body, options))).toContain("body.nodes[0].type");
  });

  it("appears in an OpenAPI document built from it, as a member of the Node union", () => {
    const Node = component("TinyNode", workflowSchemas(useRuntime().config.limits, registry).Node);
    const doc = buildDocument(useRuntime().config, [
      group({
        name: "Tiny",
        description: "A route taking a node.",
        endpoints: [
          endpoint({
            method: "POST",
            path: "/tiny",
            operationId: "tiny",
            summary: "Takes a node.",
            description: "Takes a node.",
            body: v.object({ node: Node }),
            responses: { 204: { description: "Taken." } },
          }),
        ],
      }),
    ]) as { components: { schemas: Record<string, unknown> } };
    const union = doc.components.schemas.TinyNode as {
      oneOf: unknown[];
      discriminator: { propertyName: string; mapping: Record<string, string> };
    };
    expect(union.discriminator.propertyName).toBe("type");
    expect(union.discriminator.mapping.stamp).toBe("#/components/schemas/StampTinyNode");
    expect(union.discriminator.mapping.ethTransfer).toBe("#/components/schemas/EthTransferTinyNode");
    expect(union.oneOf).toContainEqual({ $ref: "#/components/schemas/StampTinyNode" });
    const stampNode = JSON.stringify(doc.components.schemas.StampTinyNode);
    expect(stampNode).toContain('"const":"stamp"');
    expect(stampNode).toContain('"times"');
  });

  it("runs in the engine, its templates resolved", async () => {
    const { definition, graph } = definitionOf(3);
    const result = await runWorkflow({
      mode: "run",
      definition,
      graph: graph!,
      kinds: registry,
      context: {
        workflowId: "01JWORKFLOW0000000000000000",
        executionId: "01JEXECUTION000000000000000",
        executionIndex: 0,
        owner: "0x00000000000000000000000000000000000000b2",
        smartWalletAddress: RUNNER,
        chainId: 31337,
      },
      triggerOutput: { data: { word: "hey" }, headers: {}, pathParams: {} },
      startAt: Date.now(),
      secrets: async () => ({}),
    });
    expect(result.status).toBe("success");
    expect(result.steps.find((s) => s.id === "s")).toMatchObject({ success: true, output: { data: "hey hey hey" } });
  });

  it("is priced by fees from its fee rule (fallback gas at the chain's price)", async () => {
    const estimate = await estimateFees({
      definition: definitionOf(1, "estimateFees").definition,
      runner: RUNNER,
      owner: RUNNER,
      kinds: registry,
    });
    expect(estimate.cogs.find((c) => c.nodeId === "s")).toMatchObject({ costType: "gas", gasUnits: "33000" });
    expect(estimate.valueFee).toBeDefined();
  });
});
