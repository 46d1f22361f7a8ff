/**
 * Partner settings in a deploy (infra/partners.ts): `PARTNERS` and `PARTNER_ASSERTION_AUDIENCE` from the deploying
 * shell reach the wallets function, the only one serving routes that accept partner assertions, and no other; a
 * registry that is not a JSON array fails the deploy. Read from the stage's graph (tests/infra/graph.ts).
 */
import { describe, expect, it } from "vitest";
import { buildGraph, stageGraph } from "./graph";

const PARTNERS =
  '[{"id":"studio","status":"active","publicKeys":["ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="],"scopes":["read"]}]';
const { ofType } = stageGraph({ env: { PARTNERS, PARTNER_ASSERTION_AUDIENCE: "wa-gateway" } });

const environmentOf = (name: string) => {
  const lambda = ofType("aws:lambda/function:Function").find((r) => r.name === name)!;
  return ((lambda.inputs.environment as { variables?: Record<string, string> } | undefined)?.variables ?? {}) as Record<string, string>;
};

describe("partners in a deploy", () => {
  it("hands PARTNERS and PARTNER_ASSERTION_AUDIENCE to the wallets function only", () => {
    expect(environmentOf("ApiWalletsFunction")).toMatchObject({ PARTNERS, PARTNER_ASSERTION_AUDIENCE: "wa-gateway" });
    const others = ofType("aws:lambda/function:Function").filter((r) => r.name !== "ApiWalletsFunction");
    expect(others.length).toBeGreaterThan(5);
    for (const lambda of others) expect(Object.keys(environmentOf(lambda.name)), lambda.name).not.toContain("PARTNERS");
  });

  it("fails the deploy on a registry that is not a JSON array", { timeout: 300_000 }, async () => {
    await expect(buildGraph({ env: { PARTNERS: '{"id":"studio"}' } })).rejects.toThrow(/PARTNERS must be a JSON array/);
  });
});
