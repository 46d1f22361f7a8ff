/**
 * Partner assertions (API.md §21.1) over a real server, minted by the reference client's own
 * `mintPartnerAssertion` (`@avaprotocol/sdk-js/partner`): token metadata and a user's wallets read and registered
 * through an assertion, every refusal code, the routes where an assertion is no credential, a bearer token winning
 * over an assertion, a bad `PARTNERS` key refused at start, and each partner's own rate-limit bucket.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { SignJWT } from "jose";
import { Client } from "@avaprotocol/sdk-js";
import { mintPartnerAssertion, PARTNER_ASSERTION_HEADER, type MintPartnerAssertionInput } from "@avaprotocol/sdk-js/partner";
import { buildConfig } from "../../shared/config";
import { createApp } from "../../shared/http/app";
import { tokenRoutes } from "../../shared/token/routes";
import { startService, type TestService } from "../support/service";
import { httpTarget } from "../support/server";
import { signIn, type SignedIn } from "../support/auth";
import { stackEnv } from "../support/runtime";

const AUDIENCE = "wa-test-gateway";
const NATIVE = "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE";
const ZERO = "0x0000000000000000000000000000000000000000";

/** An Ed25519 pair: the private key as the reference client takes it (PKCS#8 DER, base64), the public as PARTNERS does (raw, base64). */
function partnerKey() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privateKey,
    privateKeyBase64: privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"),
    publicKeyBase64: publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("base64"),
  };
}
const studioOld = partnerKey();
const studio = partnerKey();
const wallet = partnerKey();
const paused = partnerKey();
const narrow = partnerKey();
const stranger = partnerKey();

const PARTNERS = [
  // two keys during a rotation, one written with the optional prefix
  { id: "studio", status: "active", publicKeys: [`ed25519:${studioOld.publicKeyBase64}`, studio.publicKeyBase64], scopes: ["read"] },
  { id: "wallet-app", status: "active", publicKeys: [wallet.publicKeyBase64], scopes: ["read"] },
  { id: "paused", status: "suspended", publicKeys: [paused.publicKeyBase64], scopes: ["read"] },
  { id: "narrow", status: "active", publicKeys: [narrow.publicKeyBase64], scopes: ["write"] },
];

let service: TestService;
let alice: SignedIn;
let bob: SignedIn;

beforeAll(async () => {
  service = await startService({ PARTNERS: JSON.stringify(PARTNERS), PARTNER_ASSERTION_AUDIENCE: AUDIENCE });
  alice = await signIn(httpTarget(service.url));
  bob = await signIn(httpTarget(service.url));
});

afterAll(async () => {
  await service?.close();
});

/** An assertion of `studio` for `read`, audience set, as the reference client mints it; `over` changes any input. */
const mint = (over: Partial<MintPartnerAssertionInput> = {}) =>
  mintPartnerAssertion({ privateKeyBase64: studio.privateKeyBase64, partnerId: "studio", scope: "read", audience: AUDIENCE, ...over });

/** A hand-made assertion, for what the reference client never mints (no exp, another algorithm, an array scope). */
const forge = (claims: Record<string, unknown>, key: KeyObject | Uint8Array = studio.privateKey, alg = "EdDSA") =>
  new SignJWT(claims).setProtectedHeader({ alg, typ: "JWT" }).sign(key);

async function send(method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(service.url + path, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Record<string, unknown> };
}
const asPartner = (assertion: string) => ({ [PARTNER_ASSERTION_HEADER]: assertion });
const readToken = (assertion: string) => send("GET", `/tokens/${NATIVE}`, asPartner(assertion));

describe("partner assertions: where they are accepted", () => {
  it("reads token metadata through the reference client carrying a minted assertion, with no user token", async () => {
    const client = new Client({ baseUrl: service.url, headers: asPartner(mint()) });
    const token = (await client.tokens.retrieve(NATIVE)) as unknown as Record<string, unknown>;
    expect(token).toMatchObject({ found: true, symbol: "ETH", decimals: 18, source: "native" });
  });

  it("accepts every key of a partner during a rotation, and an assertion with no subject on the token route", async () => {
    expect((await readToken(mint({ privateKeyBase64: studioOld.privateKeyBase64 }))).status).toBe(200);
    expect((await readToken(mint({ subject: undefined }))).status).toBe(200);
  });

  it("accepts scope as an array and aud as an array that includes the audience", async () => {
    const exp = Math.floor(Date.now() / 1000) + 300;
    const assertion = await forge({ iss: "studio", scope: ["other", "read"], aud: ["elsewhere", AUDIENCE], exp });
    expect((await readToken(assertion)).status).toBe(200);
    expect((await readToken(mint({ scope: ["admin", "read"], audience: ["x", AUDIENCE] }))).status).toBe(200);
  });

  it("lists and registers the wallets of the user its sub names, exactly as that user's own token does", async () => {
    const own = await send("POST", "/wallets", alice.headers, { salt: "3" });
    expect(own.status).toBe(201);
    const client = new Client({ baseUrl: service.url, headers: asPartner(mint({ subject: alice.owner.toLowerCase() })) });
    const listed = (await client.wallets.list()) as unknown as { data: { address: string; salt: string }[] };
    expect(listed.data).toEqual([expect.objectContaining({ address: own.body.address, salt: "3" })]);

    const created = (await client.wallets.create({ salt: "9" } as never)) as unknown as { address: string; owner: string };
    const seen = await send("GET", "/wallets", alice.headers);
    expect(seen.body.data).toEqual([
      expect.objectContaining({ salt: "3" }),
      expect.objectContaining({ address: created.address, salt: "9" }),
    ]);
    // derived as for Alice's own token: registering the same salt herself answers the same wallet, already there
    const again = await send("POST", "/wallets", alice.headers, { salt: "9" });
    expect(again).toMatchObject({ status: 200, body: { address: created.address } });
  });

  it("refuses a wallet route without a non-zero address in sub: 400 PARTNER_SUBJECT_REQUIRED", async () => {
    for (const subject of [undefined, ZERO, "not-an-address"]) {
      const res = await send("GET", "/wallets", asPartner(mint({ subject })));
      expect(res, String(subject)).toMatchObject({ status: 400, body: { code: "PARTNER_SUBJECT_REQUIRED" } });
    }
    const res = await send("POST", "/wallets", asPartner(mint()), { salt: "1" });
    expect(res).toMatchObject({ status: 400, body: { code: "PARTNER_SUBJECT_REQUIRED" } });
  });

  it("serves the bearer token's owner when both a token and an assertion are sent", async () => {
    await send("POST", "/wallets", bob.headers, { salt: "5" });
    const both = await send("GET", "/wallets", { ...bob.headers, ...asPartner(mint({ subject: alice.owner })) });
    expect(both.status).toBe(200);
    expect((both.body.data as { salt: string }[]).map((w) => w.salt)).toEqual(["5"]);
    // the assertion is not even looked at: a bad one changes nothing
    expect((await send("GET", "/wallets", { ...bob.headers, ...asPartner("junk") })).status).toBe(200);
  });

  it("is no credential anywhere else: those routes answer 401 AUTH_REQUIRED without a bearer token", async () => {
    const assertion = asPartner(mint({ subject: alice.owner }));
    for (const [method, path, body] of [
      ["GET", "/secrets", undefined],
      ["GET", "/workflows", undefined],
      ["GET", `/wallets/${ZERO}:getNonce`, undefined],
      ["POST", "/nodes:run", { node: { id: "n", name: "n", type: "customCode", config: { lang: "JavaScript", source: "return 1" } } }],
    ] as const) {
      const res = await send(method, path, assertion, body);
      expect(res, `${method} ${path}`).toMatchObject({ status: 401, body: { code: "AUTH_REQUIRED" } });
    }
  });
});

describe("partner assertions: every refusal of API.md §21.1", () => {
  const nowS = () => Math.floor(Date.now() / 1000);

  it("401 PARTNER_ASSERTION_MALFORMED: not a compact JWS, a payload that is not JSON, or no iss", async () => {
    const garbage = Buffer.from("not json").toString("base64url");
    for (const assertion of ["", "abc", "a.b", `eyJhbGciOiJFZERTQSJ9.${garbage}.c2ln`, await forge({ scope: "read", exp: nowS() + 60 })]) {
      expect(await readToken(assertion), assertion).toMatchObject({ status: 401, body: { code: "PARTNER_ASSERTION_MALFORMED" } });
    }
  });

  it("401 PARTNER_UNKNOWN: an issuer that is not a registered partner", async () => {
    const res = await readToken(mint({ partnerId: "nobody", privateKeyBase64: stranger.privateKeyBase64 }));
    expect(res).toMatchObject({ status: 401, body: { code: "PARTNER_UNKNOWN" } });
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
  });

  it("401 PARTNER_ASSERTION_INVALID: signed by a key the partner does not hold, or with another algorithm", async () => {
    expect(await readToken(mint({ privateKeyBase64: stranger.privateKeyBase64 }))).toMatchObject({
      status: 401,
      body: { code: "PARTNER_ASSERTION_INVALID" },
    });
    const tampered = mint().split(".");
    const claims = { ...JSON.parse(Buffer.from(tampered[1]!, "base64url").toString()), scope: "read admin" };
    const spliced = [tampered[0], Buffer.from(JSON.stringify(claims)).toString("base64url"), tampered[2]].join(".");
    expect((await readToken(spliced)).body.code).toBe("PARTNER_ASSERTION_INVALID");
    const hs = await forge({ iss: "studio", scope: "read", aud: AUDIENCE, exp: nowS() + 60 }, new Uint8Array(32).fill(7), "HS256");
    expect((await readToken(hs)).body.code).toBe("PARTNER_ASSERTION_INVALID");
    const unsigned = `${Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url")}.${tampered[1]}.`;
    expect((await readToken(unsigned)).body.code).toBe("PARTNER_ASSERTION_INVALID");
  });

  it("401 PARTNER_ASSERTION_NO_EXP: no exp, or one that is not a number", async () => {
    for (const exp of [undefined, "soon"]) {
      const res = await readToken(await forge({ iss: "studio", scope: "read", aud: AUDIENCE, ...(exp ? { exp } : {}) }));
      expect(res, String(exp)).toMatchObject({ status: 401, body: { code: "PARTNER_ASSERTION_NO_EXP" } });
    }
  });

  it("401 PARTNER_ASSERTION_TTL: expired (no leeway), or exp more than 1 hour ahead of the server's clock", async () => {
    const expired = mint({ issuedAt: nowS() - 600, expiresInSeconds: 300 });
    expect(await readToken(expired)).toMatchObject({ status: 401, body: { code: "PARTNER_ASSERTION_TTL" } });
    const tooFar = mint({ issuedAt: nowS() + 120, expiresInSeconds: 3600 });
    expect(await readToken(tooFar)).toMatchObject({ status: 401, body: { code: "PARTNER_ASSERTION_TTL" } });
    // the full hour the reference client allows is accepted
    expect((await readToken(mint({ expiresInSeconds: 3600 }))).status).toBe(200);
  });

  it("401 PARTNER_ASSERTION_AUDIENCE: an aud without the configured audience, or none", async () => {
    for (const audience of ["another-gateway", undefined]) {
      const res = await readToken(mint({ audience }));
      expect(res, String(audience)).toMatchObject({ status: 401, body: { code: "PARTNER_ASSERTION_AUDIENCE" } });
    }
  });

  it("403 PARTNER_SUSPENDED, PARTNER_SCOPE_DENIED (the registry lacks read), PARTNER_TOKEN_SCOPE (the assertion lacks it)", async () => {
    expect(await readToken(mint({ partnerId: "paused", privateKeyBase64: paused.privateKeyBase64 }))).toMatchObject({
      status: 403,
      body: { code: "PARTNER_SUSPENDED" },
    });
    expect(await readToken(mint({ partnerId: "narrow", privateKeyBase64: narrow.privateKeyBase64, scope: "read" }))).toMatchObject({
      status: 403,
      body: { code: "PARTNER_SCOPE_DENIED" },
    });
    expect(await readToken(mint({ scope: "write" }))).toMatchObject({ status: 403, body: { code: "PARTNER_TOKEN_SCOPE" } });
    // scopes are whole words: "reader" is not "read"
    expect((await readToken(mint({ scope: "reader" }))).body.code).toBe("PARTNER_TOKEN_SCOPE");
  });

  it("lists the partner refusals and the partnerAssertion scheme on the routes that accept one, in /openapi.json", async () => {
    const doc = (await send("GET", "/openapi.json", {})).body as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const tokens = doc.paths["/tokens/{address}"].get;
    expect(tokens.security).toEqual([{ bearerAuth: [] }, { partnerAssertion: [] }]);
    expect(tokens.responses["401"].description).toContain("PARTNER_ASSERTION_TTL");
    expect(tokens.responses["403"].description).toContain("PARTNER_TOKEN_SCOPE");
    expect(doc.paths["/wallets"].get.responses["400"].description).toContain("PARTNER_SUBJECT_REQUIRED");
    expect(doc.paths["/secrets"].get.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.components.securitySchemes.partnerAssertion).toMatchObject({ type: "apiKey", in: "header", name: "X-Partner-Assertion" });
  });
});

describe("partner assertions: rate limits", () => {
  it("counts each partner in its own bucket, whichever user its assertions name, apart from the users' own", async () => {
    const { runtime } = service;
    const config = runtime.config;
    const clock = Date.now();
    runtime.config = { ...config, limits: { ...config.limits, rateLimitBurst: 3, rateLimitRps: 1 } };
    runtime.now = () => clock;
    try {
      const remaining: string[] = [];
      for (const subject of [alice.owner, bob.owner, alice.owner]) {
        const res = await send("GET", "/wallets", asPartner(mint({ subject })));
        expect(res.status).toBe(200);
        remaining.push(res.headers.get("x-ratelimit-remaining")!);
      }
      expect(remaining).toEqual(["2", "1", "0"]);
      const refused = await readToken(mint());
      expect(refused).toMatchObject({ status: 429, body: { code: "RATE_LIMITED" } });
      expect(refused.headers.get("retry-after")).toBe("1");

      const other = await readToken(mint({ partnerId: "wallet-app", privateKeyBase64: wallet.privateKeyBase64 }));
      expect(other.status).toBe(200);
      expect(other.headers.get("x-ratelimit-remaining")).toBe("2");
      const own = await send("GET", "/wallets", alice.headers);
      expect(own.status).toBe(200);
      expect(own.headers.get("x-ratelimit-remaining")).toBe("2");
    } finally {
      runtime.config = config;
      runtime.now = Date.now;
    }
  });
});

describe("PARTNERS at start", () => {
  it("a host that mounts a route accepting assertions must hand createApp the check (jose only in those bundles)", () => {
    expect(() => createApp(tokenRoutes)).toThrow("GET /tokens/{address} accepts partner assertions: createApp needs options.partners");
  });

  it("npm start stops before starting anything when a key is bad, naming the setting", () => {
    const partners = [{ id: "x", status: "active", publicKeys: ["ed25519:not-a-key"], scopes: ["read"] }];
    const run = spawnSync(process.execPath, ["--import", "tsx", "local/start.ts"], {
      env: { ...process.env, PARTNERS: JSON.stringify(partners), PORT: "1", DATA_DIR: "/nonexistent", LOG_LEVEL: "warn" },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("PARTNERS.0.publicKeys.0: must be a base64 Ed25519 public key");
  });

  it("stops the start on a malformed setting or a bad key, with a message naming PARTNERS", () => {
    const env = { ...stackEnv() };
    const bad = (partners: unknown) => () =>
      buildConfig({ ...env, PARTNERS: typeof partners === "string" ? partners : JSON.stringify(partners) });
    expect(bad("[{")).toThrow(/PARTNERS: must be a JSON array/);
    expect(bad([{ id: "x", status: "active", publicKeys: ["AAAA"], scopes: ["read"] }])).toThrow(
      /PARTNERS\.0\.publicKeys\.0: must be a base64 Ed25519/,
    );
    expect(bad([{ id: "x", status: "paused", publicKeys: [studio.publicKeyBase64], scopes: [] }])).toThrow(/PARTNERS\.0\.status/);
    expect(bad([{ id: "x", status: "active", publicKeys: [], scopes: [] }])).toThrow(/PARTNERS\.0\.publicKeys/);
    const twice = { id: "x", status: "active", publicKeys: [studio.publicKeyBase64], scopes: ["read"] };
    expect(bad([twice, twice])).toThrow(/PARTNERS: names a partner id twice/);
    // members it does not know (a display name) are ignored
    expect(buildConfig({ ...env, PARTNERS: JSON.stringify([{ ...twice, name: "Studio" }]) }).partners).toMatchObject([
      { id: "x", scopes: ["read"] },
    ]);
  });
});
