/**
 * A client generated from the OpenAPI document (issue 18 item 5): openapi-typescript turns the document the server
 * serves into TypeScript types, and they compile under `strict` together with a small usage file that relies
 * on what the document says: required request bodies, the Node and Trigger unions narrowed by `type`, and the
 * stream's event schema.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";
import { buildConfig } from "../../../shared/config";
import { buildDocument } from "../../../shared/service/openapi";

const dir = mkdtempSync(join(tmpdir(), "openapi-client-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Compiles `files` (name → text) under strict and answers the diagnostics as text. */
function compile(files: Record<string, string>): string[] {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const program = ts.createProgram(
    Object.keys(files).map((name) => join(dir, name)),
    {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ["lib.es2022.d.ts"],
      types: [],
    },
  );
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const file = d.file ? d.file.fileName.slice(dir.length + 1) : "";
    return `${file}:${where ? where.line + 1 : "?"} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
  });
}

const USAGE = `import type { components, paths } from "./api";

type Schemas = components["schemas"];
type IsRequired<T, K extends keyof T> = {} extends Pick<T, K> ? false : true;
type Assert<T extends true> = T;

// A body that fails as {} is required; one that {} satisfies (the wallet update) stays optional.
export type CreateBody = Assert<IsRequired<paths["/workflows"]["post"], "requestBody">>;
export type TriggerBody = Assert<IsRequired<paths["/workflows/{id}:trigger"]["post"], "requestBody">>;
export type SecretBody = Assert<IsRequired<paths["/secrets/{name}"]["put"], "requestBody">>;
export type UpdateBody = Assert<IsRequired<paths["/wallets/{address}"]["patch"], "requestBody"> extends false ? true : false>;

// The unions narrow on \`type\`.
export function describeNode(node: Schemas["Node"]): string {
  switch (node.type) {
    case "customCode":
      return node.config.source;
    case "loop": {
      const loop: Schemas["LoopNode"] = node;
      return loop.config.runner.type;
    }
    default:
      return node.name;
  }
}
export function schedules(trigger: Schemas["Trigger"]): readonly string[] {
  return trigger.type === "cron" ? trigger.config.schedules : [];
}
// @ts-expect-error: no trigger kind is called "nope"
export const unknownKind: Schemas["Trigger"]["type"] = "nope";

// The stream's event: the status summary in \`data\`.
type StreamEvent = paths["/executions/{id}:stream"]["get"]["responses"][200]["content"]["text/event-stream"];
export const status = (event: StreamEvent): Schemas["ExecutionStatusSummary"]["status"] => event.data.status;
export const frame: StreamEvent = {
  id: "1",
  event: "status",
  data: { id: "01JD7Q0S7W3C2Y8K5N6M4P1R9T", workflowId: "01JD7Q0S7W3C2Y8K5N6M4P1R9T", status: "pending", startAt: 0 },
};
`;

describe("a TypeScript client generated from the OpenAPI document", () => {
  let api: string;
  beforeAll(async () => {
    const document = buildDocument(buildConfig({}));
    api = astToString(await openapiTS(document as unknown as Parameters<typeof openapiTS>[0]));
  }, 120_000);

  it("compiles under strict, with required bodies, discriminated kinds and the stream's events", () => {
    expect(api).toContain("export interface paths");
    expect(compile({ "api.ts": api, "usage.ts": USAGE })).toEqual([]);
  }, 120_000);

  it("fails to compile a usage the document does not allow (the check is live)", () => {
    const broken = USAGE.replace('"/wallets/{address}"]["patch"]', '"/wallets"]["post"]').replace("event.data.status", "event.data.state");
    const errors = compile({ "api.ts": api, "usage.ts": broken });
    expect(errors).toHaveLength(2);
    expect(errors.every((e) => e.startsWith("usage.ts:"))).toBe(true);
  }, 120_000);
});
