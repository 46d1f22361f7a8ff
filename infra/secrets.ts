// Stage settings kept as SST secrets, set with `sst secret set <Name> <value> --stage <stage>` (or `--fallback`
// for every stage without its own value). Functions read them through links (encrypted into their bundle, never a
// plaintext environment variable), each linking only the ones it uses.
import { createHmac, createPublicKey } from "node:crypto";
import { production } from "./stage";

/** PKCS#8 PEM of the ES256 key that signs access tokens: linked to the sign-in function only. */
export const jwtSigningKey = new sst.Secret("JwtSigningKey");

/**
 * The public half (SPKI PEM), derived at deploy time: what every other function verifies tokens with
 * (shared/http/token.ts derives the verification key with createPublicKey, which takes either form).
 */
export const jwtPublicKey = $util.unsecret(
  jwtSigningKey.value.apply((pem) => createPublicKey(pem).export({ type: "spki", format: "pem" }).toString()),
);

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
 * the client's address for per-IP rate limits (functions/viewer.ts). Derived from the stage's signing key (an
 * HMAC, so it reveals nothing of the key), with no provider beyond SST's own: `sst install` evaluates this file
 * before any provider is installed.
 */
const routerSecretValue = $util.secret(
  jwtSigningKey.value.apply((pem) => createHmac("sha256", pem).update("workflow-automation router secret").digest("base64url")),
);
export const routerSecret = new sst.Linkable("RouterSecret", { properties: { value: routerSecretValue } });
export const routerSecretHeader = { name: "x-router-secret", value: routerSecretValue };
