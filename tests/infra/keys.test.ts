/**
 * Keys in KMS (docs/deploy.md, "Keys"), read from the resource graphs of a preview and of production
 * (tests/infra/graph.ts): every stage signs tokens with a P-256 KMS key of its own, the signing keys' policies name
 * the roles that sign and give the account root administration only, `kms:Sign` is held by the functions that sign
 * alone, and no key or router secret is a setting a stage could share with another.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { FUNCTIONS } from "./functions";
import { DEFAULT_SECRETS, buildGraph, ensurePlatform, type Graph, type GraphResource } from "./graph";

let preview: Graph;
let production: Graph;

beforeAll(async () => {
  ensurePlatform();
  [preview, production] = await Promise.all([buildGraph({ stage: "pr-7" }), buildGraph({ stage: "production" })]);
}, 300_000);

const find = (g: Graph, type: string, name: string): GraphResource => {
  const found = g.resources.find((r) => r.type === type && r.name === name);
  if (!found) throw new Error(`no ${type} named ${name}`);
  return found;
};
const keyOf = (g: Graph, name: string) => find(g, "aws:kms/key:Key", name);
const arnOf = (key: GraphResource) => `arn:aws:kms:us-east-1:123456789012:${key.name}-physical`;
const roleOf = (g: Graph, fn: string) => find(g, "aws:lambda/function:Function", `${fn}Function`).inputs.role as string;

interface PolicyStatement {
  Sid: string;
  Principal: { AWS: string | string[] };
  Action: string[];
}
const policyOf = (g: Graph, name: string) => {
  const policy = find(g, "aws:kms/keyPolicy:KeyPolicy", name);
  return {
    keyId: policy.inputs.keyId,
    statements: (JSON.parse(String(policy.inputs.policy)) as { Statement: PolicyStatement[] }).Statement,
  };
};

/** Every IAM statement of a function's role that allows kms:Sign, by function: the key ARNs it may sign with. */
const signersOf = (g: Graph) =>
  Object.fromEntries(
    Object.keys(FUNCTIONS).map((fn) => {
      const policies = (find(g, "aws:iam/role:Role", `${fn}Role`).inputs.inlinePolicies ?? []) as { policy: string }[];
      const statements = policies.flatMap(
        (p) => (JSON.parse(p.policy) as { Statement: { actions: string[]; resources: string[] }[] }).Statement,
      );
      return [fn, statements.filter((s) => s.actions.includes("kms:Sign")).flatMap((s) => s.resources)];
    }),
  );

describe("the token key", () => {
  it("is a KMS key of each stage's own: ECC_NIST_P256, SIGN_VERIFY, and no stage setting holds a token key", () => {
    for (const g of [preview, production]) {
      expect(keyOf(g, "TokenKey").inputs).toMatchObject({ customerMasterKeySpec: "ECC_NIST_P256", keyUsage: "SIGN_VERIFY" });
      const settings = g.resources.filter((r) => r.type === "sst:sst:Secret").map((r) => r.name);
      expect(settings.sort()).toEqual(["AuthAllowedUris", "Chains"]);
    }
  });

  it("signs for core alone; every other function verifies with the public half read at deploy time", () => {
    for (const g of [preview, production]) {
      const env = (fn: string) =>
        (find(g, "aws:lambda/function:Function", `${fn}Function`).inputs.environment as { variables: Record<string, string> }).variables;
      expect(env("ApiCore").JWT_KMS_KEY_ID).toBe(arnOf(keyOf(g, "TokenKey")));
      expect(Object.keys(FUNCTIONS).filter((fn) => env(fn).JWT_KMS_KEY_ID !== undefined)).toEqual(["ApiCore"]);
      const read = g.calls.filter((c) => c.token === "aws:kms/getPublicKey:getPublicKey").map((c) => c.inputs.keyId);
      expect(read).toEqual([arnOf(keyOf(g, "TokenKey"))]);
    }
  });
});

describe("key policies", () => {
  const ROOT = "arn:aws:iam::123456789012:root";

  const expectAdministrationOnly = (statements: PolicyStatement[]) => {
    const root = statements.filter((s) => [s.Principal.AWS].flat().includes(ROOT));
    expect(root.map((s) => s.Sid)).toEqual(["Administration"]);
    expect(root[0]!.Action.filter((a) => a.includes("*") || ["kms:Sign", "kms:Verify", "kms:CreateGrant"].includes(a))).toEqual([]);
    expect(root[0]!.Action).toContain("kms:PutKeyPolicy");
  };

  it("on the token key: the account root administers it, core's role alone signs", () => {
    for (const g of [preview, production]) {
      const { keyId, statements } = policyOf(g, "TokenKeyPolicy");
      expect(keyId).toBe("TokenKey-id");
      expectAdministrationOnly(statements);
      const use = statements.find((s) => s.Sid === "Use");
      expect(use?.Principal.AWS).toEqual([roleOf(g, "ApiCore")]);
      expect(use?.Action).toEqual(["kms:Sign"]);
    }
  });

  it("on production's controller key: the account root administers it, the wallets' and the runner's roles sign", () => {
    const { keyId, statements } = policyOf(production, "ControllerKeyPolicy");
    expect(keyId).toBe("ControllerKey-id");
    expectAdministrationOnly(statements);
    const use = statements.find((s) => s.Sid === "Use");
    expect(use?.Principal.AWS).toEqual([roleOf(production, "ApiWallets"), roleOf(production, "Runner")]);
    expect(use?.Action).toEqual(["kms:Sign", "kms:GetPublicKey"]);
    // Previews sign with the account's development key, whose policy is set once (docs/deploy.md): not the stage's.
    expect(preview.resources.filter((r) => r.type === "aws:kms/keyPolicy:KeyPolicy").map((r) => r.name)).toEqual(["TokenKeyPolicy"]);
  });

  it("cover every signing key the stage creates", () => {
    for (const g of [preview, production]) {
      const signing = g.resources.filter((r) => r.type === "aws:kms/key:Key" && r.inputs.keyUsage === "SIGN_VERIFY");
      const policed = g.resources.filter((r) => r.type === "aws:kms/keyPolicy:KeyPolicy").map((r) => r.inputs.keyId);
      expect(signing.map((k) => `${k.name}-id`).sort()).toEqual(policed.sort());
    }
  });
});

describe("kms:Sign", () => {
  it("is held by the functions that sign only: core (tokens), wallets and the runner (user operations)", () => {
    for (const g of [preview, production]) {
      const token = arnOf(keyOf(g, "TokenKey"));
      const controller = String(g.outputs.controllerKey);
      expect(signersOf(g)).toEqual({
        ApiCore: [token],
        ApiSecrets: [],
        ApiWallets: [controller],
        ApiWorkflows: [],
        ApiExecutions: [],
        ExecutionStream: [],
        Runner: [controller],
        ChainWatcherHandler: [],
        WithdrawalFollowUpHandler: [],
        ScheduleTarget: [],
        Sandbox: [],
      });
    }
  });
});

describe("stages", () => {
  it("production signs only with keys it creates, all retained; previews look up the development controller key", () => {
    expect(production.calls.filter((c) => c.token === "aws:kms/getKey:getKey")).toEqual([]);
    expect(
      production.resources
        .filter((r) => r.type === "aws:kms/key:Key")
        .map((k) => k.name)
        .sort(),
    ).toEqual(["ControllerKey", "SecretsKey", "TokenKey"]);
    // Protected but the token key and its policy, which rotate by replacement (docs/deploy.md, "Keys").
    for (const r of production.resources.filter((r) => r.type.startsWith("aws:kms/")))
      expect([r.name, r.protect, r.retainOnDelete]).toEqual([r.name, !r.name.startsWith("TokenKey"), true]);
    expect(preview.calls.filter((c) => c.token === "aws:kms/getKey:getKey").map((c) => c.inputs.keyId)).toEqual([
      "alias/workflow-automation/development-controller",
    ]);
  });

  it("gives each stage a router secret of its own, generated (256 bits), not derived from any setting", () => {
    for (const g of [preview, production]) {
      const generated = find(g, "random:index/randomPassword:RandomPassword", "RouterSecretValue");
      expect(generated.inputs).toMatchObject({ length: 43, special: false });
      const linked = g.builds.find((b) => b.functionID === "ApiCore")!.links.RouterSecret as { value: string };
      expect(linked.value).toHaveLength(43);
      for (const setting of Object.values(DEFAULT_SECRETS)) expect(setting.includes(linked.value)).toBe(false);
    }
  });
});
