/**
 * Stages (docs/deploy.md): production owns and keeps its controller key and must name its sign-in URIs; previews
 * share the development controller key (so they share wallet addresses, factories and paymasters) and accept any
 * sign-in URI unless told otherwise.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SECRETS, buildGraph, ensurePlatform, type Graph } from "./graph";

let preview: Graph;
let production: Graph;

beforeAll(async () => {
  ensurePlatform();
  const { AuthAllowedUris: _unset, ...withoutUris } = DEFAULT_SECRETS;
  [preview, production] = await Promise.all([buildGraph({ stage: "pr-42", secrets: withoutUris }), buildGraph({ stage: "production" })]);
}, 300_000);

const keys = (g: Graph) => g.resources.filter((r) => r.type === "aws:kms/key:Key");
const environmentOf = (g: Graph, fn: string) =>
  (
    g.resources.find((r) => r.name === `${fn}Function` && r.type === "aws:lambda/function:Function")?.inputs.environment as {
      variables: Record<string, string>;
    }
  ).variables;

describe("stages", () => {
  it("previews sign with the shared development controller key and create no controller key of their own", () => {
    expect(keys(preview).map((k) => k.name)).toEqual(["SecretsKey", "TokenKey"]);
    expect(String(preview.outputs.controllerKey)).toContain("alias-workflow-automation-development-controller");
    for (const fn of ["ApiWallets", "ApiWorkflows", "Runner"])
      expect(environmentOf(preview, fn).CONTROLLER_KMS_KEY_ID, fn).toBe(preview.outputs.controllerKey);
  });

  it("production owns a secp256k1 controller key, and keeps and protects both keys", () => {
    const controller = keys(production).find((k) => k.name === "ControllerKey");
    expect(controller?.inputs).toMatchObject({ customerMasterKeySpec: "ECC_SECG_P256K1", keyUsage: "SIGN_VERIFY" });
    expect(environmentOf(production, "ApiWallets").CONTROLLER_KMS_KEY_ID).toBe(production.outputs.controllerKey);
    // The token key is replaceable (docs/deploy.md, "Keys"): retained, not protected (tests/infra/keys.test.ts).
    for (const key of keys(production).filter((k) => k.name !== "TokenKey"))
      expect([key.name, key.protect, key.retainOnDelete]).toEqual([key.name, true, true]);
    for (const key of keys(preview)) expect([key.name, key.protect ?? false]).toEqual([key.name, false]);
    expect(production.outputs._protect).toBe(true);
  });

  it("a preview without AuthAllowedUris accepts any sign-in URI, as npm start does", () => {
    expect(environmentOf(preview, "ApiCore").AUTH_ALLOWED_URIS).toBe("");
  });

  it("refuses to deploy production without AuthAllowedUris, or with a blank one", async () => {
    const { AuthAllowedUris: _unset, ...withoutUris } = DEFAULT_SECRETS;
    await expect(buildGraph({ stage: "production", secrets: withoutUris })).rejects.toThrow(/Set a value for AuthAllowedUris/);
    await expect(buildGraph({ stage: "production", secrets: { ...DEFAULT_SECRETS, AuthAllowedUris: " , " } })).rejects.toThrow(
      /AuthAllowedUris is blank/,
    );
  }, 120_000);
});
