/**
 * What a deploy of a stage creates, read from the resource graph that `sst.config.ts` builds against Pulumi's
 * mocks (tests/infra/graph.ts): no AWS account, the same SST components and provider a deploy runs.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT, buildGraph, ensurePlatform, type Graph } from "./graph";

let graph: Graph;

beforeAll(async () => {
  ensurePlatform();
  graph = await buildGraph();
}, 300_000);

const ofType = (type: string) => graph.resources.filter((r) => r.type === type);
const lambdas = () => ofType("aws:lambda/function:Function");

describe("the stage's resource graph", () => {
  it("builds without AWS, every function from an entry point in functions/", () => {
    expect(graph.builds.length).toBeGreaterThan(0);
    for (const build of graph.builds) {
      const file = build.handler.replace(/\.[^.]+$/, ".ts");
      expect(existsSync(join(ROOT, file)), `${build.functionID}: ${build.handler}`).toBe(true);
    }
  });

  it("runs every function on Node 22 (arm64)", () => {
    expect(lambdas().length).toBe(graph.builds.length);
    for (const fn of lambdas()) {
      expect(fn.inputs.runtime, fn.name).toBe("nodejs22.x");
      expect(fn.inputs.architectures, fn.name).toEqual(["arm64"]);
    }
  });
});
