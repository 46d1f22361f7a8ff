/**
 * Tokens signed by a KMS key, as on AWS (infra/kms.ts): the sign-in function's port (awsTokenSigner) signs through
 * kms:Sign on an ECC_NIST_P256 key of the local KMS endpoint, and every other function verifies with the key's
 * public half (JWT_PUBLIC_KEY), here with no private key configured at all. Through the real server: a client signs
 * in, verifies its token with jose against the served JWKS, and presents it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash, createPublicKey } from "node:crypto";
import { calculateJwkThumbprint, createLocalJWKSet, jwtVerify, type JWK } from "jose";
import { CreateKeyCommand, GetPublicKeyCommand, type SignCommandInput } from "@aws-sdk/client-kms";
import { p256 } from "@noble/curves/p256";
import { createApp, type Route } from "../../shared/http/app";
import { authRoutes } from "../../shared/auth/routes";
import { useCaller } from "../../shared/context";
import { setTokenSigner } from "../../shared/http/token";
import { derToJose } from "../../shared/envelope/kms-token-signer";
import { useKms } from "../../shared/envelope/kms";
import { awsTokenSigner } from "../../shared/service/wire-aws";
import { useTestRuntime } from "../support/runtime";
import { signIn } from "../support/auth";
import { httpTarget, startTestServer, type TestServer } from "../support/server";

const whoami: Route = { method: "GET", path: "/whoami", handler: (c) => c.json(useCaller()) };
let server: TestServer;
let keyId: string;
const signRequests: SignCommandInput[] = [];

beforeAll(async () => {
  // The key, made as infra/kms.ts makes it, and its public half as the deploy hands it to the functions.
  const kms = useKms(await useTestRuntime());
  const created = await kms.send(new CreateKeyCommand({ KeySpec: "ECC_NIST_P256", KeyUsage: "SIGN_VERIFY" }));
  keyId = created.KeyMetadata!.Arn!;
  const { PublicKey } = await kms.send(new GetPublicKeyCommand({ KeyId: keyId }));
  const publicPem = createPublicKey({ key: Buffer.from(PublicKey!), format: "der", type: "spki" }).export({ type: "spki", format: "pem" });
  const runtime = await useTestRuntime({
    JWT_SIGNING_KEY: "", // no local key: only KMS can sign
    JWT_PUBLIC_KEY: publicPem.toString(),
    JWT_KMS_KEY_ID: keyId,
    RATE_LIMIT_BURST: "100000",
  });
  expect(runtime.config.jwtSigningKey).toBeUndefined();
  awsTokenSigner();
  useKms(runtime).middlewareStack.add(
    (next) => async (args) => {
      if ((args.input as SignCommandInput).SigningAlgorithm) signRequests.push(args.input as SignCommandInput);
      return next(args);
    },
    { step: "initialize" },
  );
  server = await startTestServer(createApp([...authRoutes, whoami]));
});

afterAll(async () => {
  setTokenSigner(undefined);
  await server?.close();
});

describe("tokens signed with the KMS token key", () => {
  it("verify with jose against the served JWKS, whose kid is the KMS key's thumbprint, and authenticate", async () => {
    const { token, owner, headers } = await signIn(httpTarget(server.url));
    const { keys } = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as { keys: JWK[] };
    expect(keys).toHaveLength(1);
    expect(keys[0]!.kid).toBe(await calculateJwkThumbprint(keys[0]!, "sha256"));
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet({ keys }), { issuer: "workflow-automation" });
    expect(protectedHeader).toEqual({ alg: "ES256", typ: "JWT", kid: keys[0]!.kid });
    expect(payload.sub).toBe(owner);
    const me = await fetch(`${server.url}/whoami`, { headers });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { owner: string }).owner).toBe(owner);
  });

  it("asks KMS to sign the SHA-256 digest of the signing input with ECDSA_SHA_256, nothing else", async () => {
    signRequests.length = 0;
    const { token } = await signIn(httpTarget(server.url));
    const signingInput = token.split(".").slice(0, 2).join(".");
    expect(signRequests).toHaveLength(1);
    const [request] = signRequests;
    expect({ ...request, Message: Buffer.from(request!.Message!).toString("hex") }).toEqual({
      KeyId: keyId,
      Message: createHash("sha256").update(signingInput).digest("hex"),
      MessageType: "DIGEST",
      SigningAlgorithm: "ECDSA_SHA_256",
    });
  });
});

describe("derToJose", () => {
  it("answers r ‖ s of 64 bytes for every DER length (r or s shorter than 32 bytes, or with a sign byte)", () => {
    const lengths = new Set<number>();
    for (let i = 0; i < 1500; i++) {
      const signature = p256.sign(p256.utils.randomPrivateKey(), p256.utils.randomPrivateKey(), { lowS: false });
      const der = signature.toDERRawBytes();
      lengths.add(der.length);
      expect(Buffer.from(derToJose(der)).toString("hex")).toBe(signature.toCompactHex());
    }
    expect(Math.min(...lengths)).toBeLessThan(70); // some r or s below 32 bytes
    expect(Math.max(...lengths)).toBe(72); // r and s both with the 0x00 sign byte
  });

  it("refuses what is not a P-256 signature", () => {
    expect(() => derToJose(new Uint8Array([0x30, 0x00]))).toThrow();
    // Both integers 33 bytes without a sign byte: past 2^256.
    expect(() => derToJose(Buffer.from(`30460221${"11".repeat(33)}0221${"22".repeat(33)}`, "hex"))).toThrow(/not a P-256/);
  });
});
