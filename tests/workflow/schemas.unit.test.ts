/**
 * The workflow schemas as the OpenAPI document will see them (@valibot/to-json-schema), and the Workflow
 * object as returned (API.md §8.1).
 */
import { describe, expect, it } from "vitest";
import * as v from "valibot";
import { toJsonSchema } from "@valibot/to-json-schema";
import { workflowSchemas } from "../../shared/workflow/schemas";
import { kinds as registry } from "../../shared/kinds/kinds";
import { DEFAULT_LIMITS } from "../../shared/kinds/support/schema-kit";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const WALLET = "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4";

describe("JSON Schema conversion", () => {
  for (const typeMode of [undefined, "input", "output"] as const) {
    it(`keeps every shape of the create body (typeMode ${typeMode ?? "default"})`, () => {
      const schema = toJsonSchema(workflowSchemas().CreateBody, { errorMode: "ignore", target: "draft-2020-12", typeMode }) as Json;
      expect(schema.type).toBe("object");
      expect(schema.additionalProperties).toBe(false);
      expect(schema.required).toEqual(["smartWalletAddress", "trigger", "nodes"]);
      expect(schema.properties.smartWalletAddress.pattern).toBe("^0x[0-9a-fA-F]{40}$");

      const triggers = schema.properties.trigger.oneOf as Json[];
      expect(triggers.map((t) => t.properties.type.const)).toEqual([...registry.triggerTypes]);
      const cron = triggers.find((t) => t.properties.type.const === "cron")!.properties.config;
      expect(cron.additionalProperties).toBe(false);
      expect(cron.properties.schedules).toMatchObject({ type: "array", minItems: 1, maxItems: 10 });
      expect(cron.properties.timezone.default).toBe("UTC");

      const nodes = schema.properties.nodes as Json;
      expect(nodes).toMatchObject({ type: "array", minItems: 1, maxItems: DEFAULT_LIMITS.maxNodes });
      const kinds = nodes.items.oneOf as Json[];
      expect(kinds.map((n) => n.properties.type.const)).toEqual([...registry.nodeTypes]);
      const transfer = kinds[0]!.properties.config;
      expect(transfer.required).toEqual(["destination", "amount"]);
      expect(transfer.properties.destination).toMatchObject({ type: "string", "x-templated": true });
      expect(new RegExp(transfer.properties.destination.pattern).test("{{ settings.runner }}")).toBe(true);
      expect(new RegExp(transfer.properties.destination.pattern).test(WALLET)).toBe(true);
      expect(new RegExp(transfer.properties.amount.pattern).test("0")).toBe(false);
      expect(new RegExp(transfer.properties.amount.pattern).test("max")).toBe(true);
      expect(transfer.properties.chainId.anyOf[1]).toEqual({ type: "null" });

      const name = kinds[0]!.properties.name;
      expect(name.not.enum).toContain("settings");
      const loop = kinds.find((n) => n.properties.type.const === "loop")!.properties.config;
      expect(loop.properties.iterVar.default).toBe("value");
      expect(loop.properties.runner.oneOf).toHaveLength(6);
      expect(schema.properties.maxExecution.default).toBe(51_840);
    });
  }

  it("converts the simulate and estimateFees bodies and the Workflow object", () => {
    const simulate = toJsonSchema(workflowSchemas().SimulateBody, { errorMode: "ignore" }) as Json;
    expect(simulate.required).toEqual(["trigger", "nodes", "inputVariables"]);
    const estimate = toJsonSchema(workflowSchemas().EstimateFeesBody, { errorMode: "ignore" }) as Json;
    expect(estimate.required).toEqual(["trigger", "nodes", "createdAt", "expireAt", "maxExecution"]);
    const workflow = toJsonSchema(workflowSchemas().Workflow, { errorMode: "ignore" }) as Json;
    expect(workflow.properties.status.enum).toEqual(["enabled", "disabled", "completed", "failed"]);
  });
});

describe("the Workflow object", () => {
  it("parses a stored workflow as returned", () => {
    const workflow = {
      id: "01jd7qz8w1e5r3t7y9v2k4p6ma",
      owner: WALLET,
      smartWalletAddress: WALLET,
      chainId: 1,
      trigger: { id: "t", name: "start", type: "cron", config: { schedules: ["*/5 * * * *"], timezone: "UTC" } },
      nodes: [{ id: "a", name: "a", type: "customCode", config: { lang: "javascript", source: "return 1" } }],
      edges: [{ id: "_e0", source: "t", target: "a" }],
      inputVariables: { settings: { runner: WALLET, chainId: 1 } },
      status: "enabled",
      maxExecution: 10,
      executionCount: 0,
      remainingExecutions: 10,
      createdAt: 1_795_000_000_000,
    };
    const parsed = v.parse(workflowSchemas().Workflow, workflow);
    expect(parsed.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(v.safeParse(workflowSchemas().Workflow, { ...workflow, status: "running" }).success).toBe(false);
  });
});
