// Stage settings kept as SST secrets, set with `sst secret set <Name> <value> --stage <stage>` (or `--fallback`
// for every stage without its own value). Functions read them through links (encrypted into their bundle, never a
// plaintext environment variable), each linking only the ones it uses. No key is a setting: the token key is a KMS
// key of the stage's own (infra/kms.ts) and the router secret is generated for the stage (below).
import { createRequire } from "node:module";
import type * as PulumiRandom from "@pulumi/random";
import { production } from "./stage";

/** JSON array of chain settings (rpcUrl, bundlerUrl, factory, paymaster per chainId): see README. */
export const chains = new sst.Secret("Chains", "[]");

/**
 * `AUTH_ALLOWED_URIS`: the URIs a sign-in message may name (comma-separated). Required in production, where an
 * unset or blank value refuses the deploy; a preview without it accepts any URI, as `npm start` does.
 */
export const authAllowedUris = new sst.Secret("AuthAllowedUris", production ? undefined : "");

/** The setting's value, checked: what the sign-in function is configured with. */
export const authAllowedUrisValue = $util.unsecret(
  authAllowedUris.value.apply((value) => {
    if (production && !value.split(",").some((uri) => uri.trim() !== ""))
      throw new Error("AuthAllowedUris is blank: a production stage must name the URIs sign-in accepts (docs/deploy.md)");
    return value;
  }),
);

/**
 * Shared by the router (an origin header on every request it forwards) and the HTTP functions: a request that
 * carries it came through CloudFront, so its `x-viewer-address` (set by the router's viewer-request function) is
 * the client's address for per-IP rate limits (functions/viewer.ts). 43 random characters (256 bits) generated once
 * per stage and kept in its state, derived from nothing else; @pulumi/random is SST's own provider (its functions'
 * link encryption keys use it), so nothing is installed for it.
 */
// Loaded when this file runs (inside `run`), not imported: a static import would be hoisted into the evaluated
// config, which `sst install` runs before the platform that holds @pulumi/random exists (a fresh clone).
const { RandomPassword } = createRequire(import.meta.url)("@pulumi/random") as typeof PulumiRandom;
const routerSecretValue = new RandomPassword("RouterSecretValue", { length: 43, special: false }).result;
export const routerSecret = new sst.Linkable("RouterSecret", { properties: { value: routerSecretValue } });
export const routerSecretHeader = { name: "x-router-secret", value: routerSecretValue };
