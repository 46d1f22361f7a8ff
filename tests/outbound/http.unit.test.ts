/**
 * The outbound HTTP client of restApi and graphqlQuery (shared/outbound/client.ts, API.md §8.4.4, §8.4.5, §4.1):
 * output shape, bodies, redirects, the time and size limits, and the destination checks that keep workflow
 * authors away from the host, its network and the cloud metadata service. Every server here listens on
 * 127.0.0.1; the functional cases allow private networks, the refusals do not, and where a test needs a
 * "public" first hop it injects the resolver and the address classification instead of touching DNS.
 */
import { once } from "node:events";
import { createServer as createTlsServer } from "node:https";
import type { LookupAddress } from "node:dns";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { fetchGuarded } from "../../shared/outbound/client";
import { OutboundError, type GuardOptions, type OutboundRequest } from "../../shared/outbound/types";
import { addressRefusal } from "../../shared/outbound/ip";
import { JsonText, materialize } from "../../shared/json-text";
import type { NodeEnv, NodeResult } from "../../shared/kinds/kind";
import { graphqlQuery } from "../../shared/kinds/nodes/graphql-query";
import { restApi } from "../../shared/kinds/nodes/rest-api";
import { sensitiveHeaders } from "../../shared/kinds/support/http-step";
import { renderConfig } from "../../shared/templates";
import { startServer, type Handler } from "../engine/engine-support";

type TestServer = Awaited<ReturnType<typeof startServer>>;

const redirect =
  (location: string, status = 302): Handler =>
  (_req, res) =>
    res.writeHead(status, { location }).end();

const LOCAL: GuardOptions = { timeoutMs: 5_000, maxResponseBytes: 1_048_576, allowPrivateNetwork: true };
const GUARDED: GuardOptions = { timeoutMs: 5_000, maxResponseBytes: 1_048_576, allowPrivateNetwork: false };

/** Fails the test if the code under test asks DNS anything. */
const noDns = async (hostname: string): Promise<LookupAddress[]> => {
  throw new Error(`unexpected DNS lookup of ${hostname}`);
};

/** A resolver that answers from a table (and records what it was asked). */
function fakeDns(table: Record<string, string[]>) {
  const asked: string[] = [];
  const resolve = async (hostname: string): Promise<LookupAddress[]> => {
    asked.push(hostname);
    const addresses = table[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return { resolve, asked };
}

/** A self-signed certificate for secure.example (P-256, valid until 2126). */
const TLS_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1yorL9H+coNC2CpZ
8yQWCbOTx43ofLi2QEHnwWA1GQuhRANCAAQ9ITDqkPx0ceb6IvVvnyEE5yMhg0DV
HQo7Oh3kkibTPoYe/2ye4jvc0rbPx9sqcBkx7d3NiGAYW6Vkgjl3U3hQ
-----END PRIVATE KEY-----`;
const TLS_CERT = `-----BEGIN CERTIFICATE-----
MIIBpTCCAUqgAwIBAgIUXM44nfn7FVJqsTxKRUettIMoXBwwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOc2VjdXJlLmV4YW1wbGUwIBcNMjYxMTIzMTgxMDUzWhgPMjEy
NjEwMzAxODEwNTNaMBkxFzAVBgNVBAMMDnNlY3VyZS5leGFtcGxlMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEPSEw6pD8dHHm+iL1b58hBOcjIYNA1R0KOzod5JIm
0z6GHv9snuI73NK2z8fbKnAZMe3dzYhgGFulZII5d1N4UKNuMGwwHQYDVR0OBBYE
FHElkRCCxpcQepDq52wSGKqKKXX0MB8GA1UdIwQYMBaAFHElkRCCxpcQepDq52wS
GKqKKXX0MA8GA1UdEwEB/wQFMAMBAf8wGQYDVR0RBBIwEIIOc2VjdXJlLmV4YW1w
bGUwCgYIKoZIzj0EAwIDSQAwRgIhAP7pjFVdarkKkWJn/O6TNlxZUacl5wVBsVlF
IqQpmNjcAiEAxWXpXdDsXgoGZji00m66fy29Ad+yNkeoe6CQZGfTqzo=
-----END CERTIFICATE-----`;

/** Treats 127.0.0.1 as public so a loopback test server can stand in for a public first hop. */
const loopbackIsPublic = (address: string) => (address === "127.0.0.1" ? undefined : addressRefusal(address));

async function failure(request: OutboundRequest, options: GuardOptions): Promise<OutboundError> {
  const err = await fetchGuarded(request, options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OutboundError);
  return err as OutboundError;
}

let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  a = await startServer({});
  b = await startServer({});
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
});
beforeEach(() => {
  for (const s of [a, b]) {
    s.seen.length = 0;
    for (const key of Object.keys(s.routes)) delete s.routes[key];
  }
});

describe("responses", () => {
  it("returns status, statusText, the url, lowercased header names and the parsed JSON body", async () => {
    a.routes["/json"] = (_req, res) =>
      res.writeHead(201, "Made It", { "Content-Type": "application/json", "X-Thing-ID": "42" }).end('{"ok":true,"n":[1,2]}');
    const out = await fetchGuarded({ url: `${a.origin}/json?q=1`, method: "get" }, LOCAL);
    expect(out).toMatchObject({ status: 201, statusText: "Made It", url: `${a.origin}/json?q=1` });
    // A JSON body is held as its (compact) text, parsed only where a step reads it (API.md §18.2).
    expect(out.data).toBeInstanceOf(JsonText);
    expect(materialize(out.data)).toEqual({ ok: true, n: [1, 2] });
    expect(out.headers["x-thing-id"]).toBe("42");
    expect(out.headers["content-type"]).toBe("application/json");
    expect(Object.keys(out.headers).every((k) => k === k.toLowerCase())).toBe(true);
  });

  it("keeps every response header as data, __proto__ and repeated names included (API.md §18.6)", async () => {
    a.routes["/odd"] = (_req, res) =>
      res
        .writeHead(200, [
          ["__proto__", "x"],
          ["Set-Cookie", "a=1"],
          ["set-cookie", "b=2"],
          ["X-Dup", "1"],
          ["x-dup", "2"],
        ])
        .end("ok");
    const out = await fetchGuarded({ url: `${a.origin}/odd` }, LOCAL);
    expect(Object.getOwnPropertyDescriptor(out.headers, "__proto__")?.value).toBe("x");
    expect(out.headers["set-cookie"]).toBe("a=1, b=2");
    expect(out.headers["x-dup"]).toBe("1, 2");
    expect(JSON.parse(JSON.stringify(out.headers))).toMatchObject({ ["__proto__"]: "x" });
  });

  it("returns the body text when it is not JSON, decoded in its charset", async () => {
    a.routes["/text"] = (_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<p>hello</p>");
    a.routes["/latin1"] = (_req, res) =>
      res.writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" }).end(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    a.routes["/empty"] = (_req, res) => res.writeHead(200).end();
    expect((await fetchGuarded({ url: `${a.origin}/text` }, LOCAL)).data).toBe("<p>hello</p>");
    expect((await fetchGuarded({ url: `${a.origin}/latin1` }, LOCAL)).data).toBe("café");
    expect((await fetchGuarded({ url: `${a.origin}/empty` }, LOCAL)).data).toBe("");
  });

  it("returns 4xx and 5xx responses with their body instead of throwing (the node turns them into HTTP_ERROR)", async () => {
    a.routes["/missing"] = (_req, res) => res.writeHead(404, { "content-type": "application/json" }).end('{"error":"nope"}');
    const out = await fetchGuarded({ url: `${a.origin}/missing` }, LOCAL);
    expect(out).toMatchObject({ status: 404, statusText: "Not Found" });
    expect(materialize(out.data)).toEqual({ error: "nope" });
  });

  it("decodes gzip bodies", async () => {
    a.routes["/gz"] = (_req, res) =>
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" }).end(gzipSync('{"zipped":1}'));
    expect(materialize((await fetchGuarded({ url: `${a.origin}/gz` }, LOCAL)).data)).toEqual({ zipped: 1 });
  });
});

describe("requests", () => {
  it("sends a body as application/json unless the author set a Content-Type, with the author's headers", async () => {
    a.routes["/echo"] = (_req, res) => res.writeHead(200).end("ok");
    await fetchGuarded({ url: `${a.origin}/echo`, method: "post", body: '{"a":1}', headers: { "X-Api-Key": "k1" } }, LOCAL);
    await fetchGuarded({ url: `${a.origin}/echo`, method: "PUT", body: "a=1", headers: { "content-type": "text/plain" } }, LOCAL);
    expect(a.seen[0]).toMatchObject({ method: "POST", body: '{"a":1}' });
    expect(a.seen[0]!.headers).toMatchObject({ "content-type": "application/json", "x-api-key": "k1", "content-length": "7" });
    expect(a.seen[1]).toMatchObject({ method: "PUT", body: "a=1" });
    expect(a.seen[1]!.headers["content-type"]).toBe("text/plain");
  });

  it("does HEAD and OPTIONS; HEAD has no body in the output", async () => {
    a.routes["/h"] = (req, res) =>
      res.writeHead(200, { "x-m": req.method!, "content-length": "5" }).end(req.method === "HEAD" ? undefined : "hello");
    const head = await fetchGuarded({ url: `${a.origin}/h`, method: "HEAD" }, LOCAL);
    expect(head).toMatchObject({ status: 200, data: "" });
    expect(head.headers["x-m"]).toBe("HEAD");
    const options = await fetchGuarded({ url: `${a.origin}/h`, method: "options" }, LOCAL);
    expect(options.headers["x-m"]).toBe("OPTIONS");
  });

  it("refuses a body with GET or HEAD, unknown methods, non-http URLs, credentials in the URL and bad header values as INVALID_INPUT, without connecting", async () => {
    const before = a.connections();
    const cases: OutboundRequest[] = [
      { url: `${a.origin}/`, method: "GET", body: "{}" },
      { url: `${a.origin}/`, method: "HEAD", body: "{}" },
      { url: `${a.origin}/`, method: "TRACE" },
      { url: "ftp://example.com/file" },
      { url: "file:///etc/passwd" },
      { url: "not a url" },
      { url: `http://user:pass@127.0.0.1:${a.port}/` },
      { url: `${a.origin}/`, headers: { "x-key": "line\r\nInjected: yes" } },
      { url: `${a.origin}/`, headers: { "bad name": "v" } },
    ];
    for (const request of cases) expect((await failure(request, LOCAL)).code).toBe("INVALID_INPUT");
    expect(a.connections()).toBe(before);
  });
});

describe("redirects", () => {
  it("follows up to 5 redirects and reports the final url; a 6th redirect fails the request", async () => {
    for (let i = 0; i < 6; i++) a.routes[`/r${i}`] = redirect(`/r${i + 1}`);
    a.routes["/r6"] = (_req, res) => res.writeHead(200).end('"done"');
    const five = await fetchGuarded({ url: `${a.origin}/r1` }, LOCAL);
    expect(five).toMatchObject({ status: 200, url: `${a.origin}/r6`, data: "done" });
    a.seen.length = 0;
    const six = await failure({ url: `${a.origin}/r0` }, LOCAL);
    expect(six.code).toBe("NETWORK_ERROR");
    expect(six.message).toMatch(/too many redirects/);
    expect(a.seen.map((s) => s.url)).toEqual(["/r0", "/r1", "/r2", "/r3", "/r4", "/r5"]);
  });

  it("turns POST into GET without a body on 301, 302 and 303, and keeps method and body on 307 and 308", async () => {
    a.routes["/end"] = (_req, res) => res.writeHead(200).end("ok");
    for (const status of [301, 302, 303, 307, 308]) {
      a.routes[`/s${status}`] = redirect("/end", status);
      a.seen.length = 0;
      await fetchGuarded({ url: `${a.origin}/s${status}`, method: "POST", body: '{"x":1}' }, LOCAL);
      const final = a.seen[1]!;
      if (status < 307) {
        expect(final, String(status)).toMatchObject({ method: "GET", body: "" });
        expect(final.headers["content-type"], String(status)).toBeUndefined();
      } else {
        expect(final, String(status)).toMatchObject({ method: "POST", body: '{"x":1}' });
        expect(final.headers["content-type"], String(status)).toBe("application/json");
      }
    }
    // 303 turns PUT into GET as well; 302 leaves PUT alone.
    a.routes["/put303"] = redirect("/end", 303);
    a.routes["/put302"] = redirect("/end", 302);
    a.seen.length = 0;
    await fetchGuarded({ url: `${a.origin}/put303`, method: "PUT", body: "{}" }, LOCAL);
    await fetchGuarded({ url: `${a.origin}/put302`, method: "PUT", body: "{}" }, LOCAL);
    expect(a.seen.map((s) => s.method)).toEqual(["PUT", "GET", "PUT", "PUT"]);
  });

  it("drops Authorization, Cookie, Proxy-Authorization and the sensitive headers when a redirect leaves the origin (another port), and keeps them within it", async () => {
    b.routes["/there"] = (_req, res) => res.writeHead(200).end("ok");
    a.routes["/here"] = (_req, res) => res.writeHead(200).end("ok");
    a.routes["/away"] = redirect(`${b.origin}/there`, 307);
    a.routes["/stay"] = redirect("/here", 307);
    const headers = {
      Authorization: "Bearer s3cret",
      Cookie: "sid=s3cret",
      "Proxy-Authorization": "Basic czNjcmV0",
      "X-Api-Key": "s3cret",
      "X-Other": "kept",
    };
    const sent = {
      authorization: "Bearer s3cret",
      cookie: "sid=s3cret",
      "proxy-authorization": "Basic czNjcmV0",
      "x-api-key": "s3cret",
      "x-other": "kept",
    };
    const request = { headers, sensitiveHeaders: ["x-API-key"] };
    await fetchGuarded({ url: `${a.origin}/away`, ...request }, LOCAL);
    expect(a.seen[0]!.headers).toMatchObject(sent);
    for (const name of ["authorization", "cookie", "proxy-authorization", "x-api-key"]) expect(b.seen[0]!.headers[name]).toBeUndefined();
    expect(b.seen[0]!.headers["x-other"]).toBe("kept");
    await fetchGuarded({ url: `${a.origin}/stay`, ...request }, LOCAL);
    expect(a.seen.at(-1)!.url).toBe("/here");
    expect(a.seen.at(-1)!.headers).toMatchObject(sent);
  });

  it("treats another host on the same port as another origin, and keeps nothing dropped when the chain comes back", async () => {
    const dns = fakeDns({ "other.example": ["127.0.0.1"] });
    a.routes["/to-other"] = redirect(`http://other.example:${a.port}/back`, 307);
    a.routes["/back"] = redirect(`${a.origin}/end`, 307);
    a.routes["/end"] = (_req, res) => res.writeHead(200).end("ok");
    const headers = { authorization: "Bearer s3cret", "x-api-key": "s3cret", "x-other": "kept" };
    const out = await fetchGuarded(
      { url: `${a.origin}/to-other`, headers, sensitiveHeaders: ["X-Api-Key"] },
      { ...LOCAL, resolve: dns.resolve },
    );
    expect(out.url).toBe(`${a.origin}/end`);
    expect(a.seen.map((s) => [s.headers.host, s.url])).toEqual([
      [`127.0.0.1:${a.port}`, "/to-other"],
      [`other.example:${a.port}`, "/back"],
      [`127.0.0.1:${a.port}`, "/end"],
    ]);
    expect(a.seen[0]!.headers).toMatchObject(headers);
    for (const hop of a.seen.slice(1)) {
      expect(hop.headers.authorization).toBeUndefined();
      expect(hop.headers["x-api-key"]).toBeUndefined();
      expect(hop.headers["x-other"]).toBe("kept");
    }
  });

  it("refuses a redirect to a scheme other than http and https", async () => {
    a.routes["/file"] = redirect("file:///etc/passwd");
    const err = await failure({ url: `${a.origin}/file` }, LOCAL);
    expect(err.code).toBe("DESTINATION_NOT_ALLOWED");
  });
});

describe("restApi and graphqlQuery: headers that carry a secret (API.md §18.3)", () => {
  const API_KEY = "sk-live-0123456789";
  const OTHER = "other-secret-value";
  const secrets = { API_KEY, OTHER, PIN: "42" };
  const variables = {
    secrets,
    apContext: { configVars: secrets },
    prev: {
      data: {
        token: `tok-${API_KEY}`,
        basic: Buffer.from(`user:${OTHER}`).toString("base64"),
        plain: "hello",
        pin: "42",
        pinInside: "v42",
      },
    },
  };
  /** The parts of a NodeEnv the HTTP kinds use, rendering with the run's `secrets` as the engine does. */
  const env = {
    nodeId: "r",
    variables,
    render: <T>(config: T) => renderConfig(config, variables),
    limits: { httpNodeTimeoutMs: 5_000, httpNodeMaxResponseBytes: 1_048_576 },
    allowPrivateNetwork: true,
    holdState: () => undefined,
    takeRequest: () => undefined,
  } as unknown as NodeEnv;
  const headers = {
    Authorization: "Bearer not-a-secret",
    Cookie: "sid=1",
    "Proxy-Authorization": "Basic cHJveHk6cHc=",
    "X-Api-Key": "{{secrets.API_KEY}}",
    "X-Config-Var": "key={{apContext.configVars.OTHER}}",
    "X-Passed-On": "{{prev.data.token}}",
    "X-Encoded": "Basic {{prev.data.basic}}",
    "X-Pin": "{{prev.data.pin}}",
    "X-Plain": "{{prev.data.plain}}",
    "X-Pin-Inside": "{{prev.data.pinInside}}",
  };
  const secretBearing = ["x-api-key", "x-config-var", "x-passed-on", "x-encoded", "x-pin"];

  it("names the headers whose template refers to a secret or whose value holds one (in any redacted form)", () => {
    expect(sensitiveHeaders(env, headers, renderConfig(headers, variables))).toEqual([
      "X-Api-Key",
      "X-Config-Var",
      "X-Passed-On",
      "X-Encoded",
      "X-Pin",
    ]);
    expect(sensitiveHeaders(env, undefined, undefined)).toEqual([]);
    expect(sensitiveHeaders({ ...env, variables: {} } as NodeEnv, { a: "x" }, { a: API_KEY })).toEqual([]);
  });

  it("restApi: a cross-origin redirect drops the credential headers and every header carrying a secret; a same-origin one keeps them", async () => {
    b.routes["/there"] = (_req, res) => res.writeHead(200).end("ok");
    a.routes["/here"] = (_req, res) => res.writeHead(200).end("ok");
    a.routes["/away"] = redirect(`${b.origin}/there`, 307);
    a.routes["/stay"] = redirect("/here", 307);
    const rendered = renderConfig(headers, variables);
    const all = Object.fromEntries(Object.entries(rendered).map(([k, v]) => [k.toLowerCase(), v]));

    await restApi.run({ url: `${a.origin}/away`, method: "GET", headers }, env);
    expect(a.seen[0]!.headers).toMatchObject(all);
    const there = b.seen[0]!.headers;
    for (const name of ["authorization", "cookie", "proxy-authorization", ...secretBearing]) expect(there[name], name).toBeUndefined();
    expect(there).toMatchObject({ "x-plain": "hello", "x-pin-inside": "v42" });
    expect(JSON.stringify(there)).not.toContain(API_KEY);

    await restApi.run({ url: `${a.origin}/stay`, method: "GET", headers }, env);
    expect(a.seen.at(-1)!.url).toBe("/here");
    expect(a.seen.at(-1)!.headers).toMatchObject(all);
  });

  it("graphqlQuery: its own headers carry no secret, so a cross-origin redirect keeps them", async () => {
    b.routes["/gql"] = (_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"data":{"ok":true}}');
    a.routes["/gql-away"] = redirect(`${b.origin}/gql`, 307);
    const out = await graphqlQuery.run(
      { url: `${a.origin}/gql-away`, query: "query { ok }", variables: { key: "{{secrets.API_KEY}}" } },
      env,
    );
    expect(materialize((out as NodeResult).data)).toEqual({ data: { ok: true } });
    expect(b.seen[0]!.headers).toMatchObject({ "content-type": "application/json", accept: "application/json" });
  });
});

describe("limits", () => {
  it("aborts a response body as soon as it exceeds the size limit: the server sees the connection close before it sent everything", async () => {
    const total = 64 * 1_048_576;
    let written = 0;
    let closedEarly: Promise<boolean> = Promise.resolve(false);
    a.routes["/huge"] = (_req, res) => {
      closedEarly = new Promise((resolve) => res.on("close", () => resolve(!res.writableFinished)));
      res.writeHead(200, { "content-type": "text/plain" });
      const chunk = Buffer.alloc(65_536, 0x61);
      const pump = () => {
        while (written < total && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    };
    const err = await failure({ url: `${a.origin}/huge` }, { ...LOCAL, maxResponseBytes: 256 * 1024 });
    expect(err.code).toBe("RESPONSE_TOO_LARGE");
    expect(await closedEarly).toBe(true);
    expect(written).toBeLessThan(total);
  });

  it("refuses a declared Content-Length above the limit before reading the body", async () => {
    a.routes["/declared"] = (_req, res) => {
      res.writeHead(200, { "content-length": String(2_000_000) });
      res.write("x");
    };
    const err = await failure({ url: `${a.origin}/declared` }, { ...LOCAL, maxResponseBytes: 1_000_000 });
    expect(err.code).toBe("RESPONSE_TOO_LARGE");
  });

  it("counts the decoded bytes of a compressed body against the limit (no gzip bomb)", async () => {
    const bomb = gzipSync(Buffer.alloc(8 * 1_048_576));
    expect(bomb.length).toBeLessThan(64 * 1024);
    a.routes["/bomb"] = (_req, res) => res.writeHead(200, { "content-encoding": "gzip" }).end(bomb);
    const err = await failure({ url: `${a.origin}/bomb` }, { ...LOCAL, maxResponseBytes: 1_048_576 });
    expect(err.code).toBe("RESPONSE_TOO_LARGE");
  });

  it("fails with NETWORK_ERROR when the whole request (headers or body) takes longer than the timeout", async () => {
    a.routes["/hang"] = () => {};
    a.routes["/drip"] = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      const timer = setInterval(() => res.write("."), 20);
      res.on("close", () => clearInterval(timer));
    };
    for (const path of ["/hang", "/drip"]) {
      const started = Date.now();
      const err = await failure({ url: `${a.origin}${path}` }, { ...LOCAL, timeoutMs: 300 });
      expect(err.code, path).toBe("NETWORK_ERROR");
      expect(err.message, path).toMatch(/timed out after 300 ms/);
      expect(Date.now() - started, path).toBeLessThan(2_000);
    }
  });

  it("with allow_private_network, reaches localhost through the system resolver (the local runtime's case)", async () => {
    a.routes["/local"] = (_req, res) => res.writeHead(200).end('"here"');
    const out = await fetchGuarded({ url: `http://localhost:${a.port}/local` }, LOCAL);
    expect(out).toMatchObject({ status: 200, url: `http://localhost:${a.port}/local`, data: "here" });
  });

  it("reports connection failures as NETWORK_ERROR without the path, query, headers or body", async () => {
    const closed = await startServer({});
    await closed.close();
    const err = await failure(
      {
        url: `${closed.origin}/p/s3cret-path?key=s3cret-query`,
        method: "POST",
        headers: { authorization: "s3cret-header" },
        body: "s3cret-body",
      },
      LOCAL,
    );
    expect(err.code).toBe("NETWORK_ERROR");
    expect(err.message).toMatch(/ECONNREFUSED/);
    expect(err.message).not.toMatch(/s3cret/);
  });
});

describe("destinations (allow_private_network false)", () => {
  it.each([
    ["loopback", (p: number) => `http://127.0.0.1:${p}/`],
    ["loopback elsewhere in 127/8", (p: number) => `http://127.1.2.3:${p}/`],
    ["localhost by name", (p: number) => `http://localhost:${p}/`],
    ["a localhost subdomain", (p: number) => `http://api.localhost:${p}/`],
    ["IPv6 loopback", (p: number) => `http://[::1]:${p}/`],
    ["IPv4-mapped loopback", (p: number) => `http://[::ffff:127.0.0.1]:${p}/`],
    ["decimal IPv4", (p: number) => `http://2130706433:${p}/`],
    ["hex IPv4", (p: number) => `http://0x7f000001:${p}/`],
    ["short hex IPv4", (p: number) => `http://0x7f.1:${p}/`],
    ["octal IPv4", (p: number) => `http://017700000001:${p}/`],
    ["unspecified", (p: number) => `http://0.0.0.0:${p}/`],
    ["IPv6 unspecified", (p: number) => `http://[::]:${p}/`],
    ["private 10/8", () => "http://10.0.0.1/"],
    ["private 172.16/12", () => "https://172.20.1.1/"],
    ["private 192.168/16", () => "http://192.168.1.1/"],
    ["CGNAT", () => "http://100.64.0.1/"],
    ["link-local", () => "http://169.254.10.10/"],
    ["AWS metadata", () => "http://169.254.169.254/latest/meta-data/"],
    ["AWS IPv6 metadata", () => "http://[fd00:ec2::254]/"],
    ["GCP metadata by name", () => "http://metadata.google.internal/computeMetadata/v1/"],
    ["metadata name with a final dot", () => "http://METADATA.google.internal./"],
    ["unique-local", () => "http://[fc00::1]/"],
    ["IPv6 link-local", () => "http://[fe80::1]/"],
    ["NAT64 of a private address", () => "http://[64:ff9b::10.0.0.1]/"],
    ["6to4 of loopback", () => "http://[2002:7f00:1::1]/"],
    ["multicast", () => "http://224.0.0.1/"],
    ["broadcast", () => "http://255.255.255.255/"],
    ["a smuggling port (SMTP)", () => "http://93.184.216.34:25/"],
  ])("refuses %s with DESTINATION_NOT_ALLOWED, without DNS or a connection", async (_what, url) => {
    const before = a.connections();
    const err = await failure({ url: url(a.port) }, { ...GUARDED, resolve: noDns });
    expect(err.code).toBe("DESTINATION_NOT_ALLOWED");
    expect(err.message).toMatch(/^destination not allowed: /);
    expect(a.connections()).toBe(before);
  });

  it("refuses a public-looking host name that resolves to a loopback address", async () => {
    const dns = fakeDns({ "api.example.com": ["127.0.0.1"] });
    const err = await failure({ url: `http://api.example.com:${a.port}/` }, { ...GUARDED, resolve: dns.resolve });
    expect(err).toMatchObject({
      code: "DESTINATION_NOT_ALLOWED",
      message: "destination not allowed: api.example.com resolves to a loopback address",
    });
    expect(a.seen).toHaveLength(0);
  });

  it("refuses a host name when any one of its addresses is private, and does not name the address", async () => {
    const dns = fakeDns({ "mixed.example.com": ["93.184.216.34", "2606:2800:220:1::1", "10.1.2.3"] });
    const err = await failure({ url: "https://mixed.example.com/" }, { ...GUARDED, resolve: dns.resolve });
    expect(err.code).toBe("DESTINATION_NOT_ALLOWED");
    expect(err.message).not.toMatch(/10\.1\.2\.3/);
  });

  it("connects to exactly the address it checked and never resolves the name again (no DNS rebinding gap)", async () => {
    // The first answer passes the check; any later answer would point at the metadata service.
    let calls = 0;
    const resolve = async (): Promise<LookupAddress[]> =>
      ++calls === 1 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "169.254.169.254", family: 4 }];
    a.routes["/pinned"] = (_req, res) => res.writeHead(200).end('"reached"');
    const out = await fetchGuarded(
      { url: `http://rebind.example:${a.port}/pinned` },
      { ...GUARDED, resolve, addressRefusal: loopbackIsPublic },
    );
    expect(out.data).toBe("reached");
    expect(calls).toBe(1);
    expect(a.seen[0]!.headers.host).toBe(`rebind.example:${a.port}`);
  });

  it("checks every redirect hop: an allowed server redirecting to private, metadata or localhost destinations is refused", async () => {
    const dns = fakeDns({ "public.example": ["127.0.0.1"], "internal.example": ["10.0.0.5"] });
    const options = { ...GUARDED, resolve: dns.resolve, addressRefusal: loopbackIsPublic };
    a.routes["/ok"] = (_req, res) => res.writeHead(200).end("fine");
    a.routes["/to-ok"] = redirect(`http://public.example:${a.port}/ok`);
    expect((await fetchGuarded({ url: `http://public.example:${a.port}/to-ok` }, options)).data).toBe("fine");

    const targets = [
      "http://169.254.169.254/latest/meta-data/iam/",
      "http://10.0.0.1/",
      `http://localhost:${a.port}/ok`,
      `http://[::1]:${a.port}/ok`,
      "http://internal.example/",
      `http://2130706434:${a.port}/ok`, // 127.0.0.2 (127.0.0.1 plays the public host here)
    ];
    for (const target of targets) {
      a.routes["/evil"] = redirect(target, 307);
      a.seen.length = 0;
      const err = await failure({ url: `http://public.example:${a.port}/evil` }, options);
      expect(err.code, target).toBe("DESTINATION_NOT_ALLOWED");
      expect(
        a.seen.map((s) => s.url),
        target,
      ).toEqual(["/evil"]);
    }
  });

  it("https to a pinned address still sends the host name as SNI and verifies the certificate (an untrusted one fails)", async () => {
    const names: string[] = [];
    const tls = createTlsServer(
      {
        key: TLS_KEY,
        cert: TLS_CERT,
        // Records the SNI name, then answers with the default certificate.
        SNICallback: (servername, done) => {
          names.push(servername);
          done(null, undefined);
        },
      },
      (_req, res) => res.end("unreachable"),
    );
    tls.listen(0, "127.0.0.1");
    await once(tls, "listening");
    const port = (tls.address() as AddressInfo).port;
    const dns = fakeDns({ "secure.example": ["127.0.0.1"] });
    try {
      const err = await failure(
        { url: `https://secure.example:${port}/` },
        { ...GUARDED, resolve: dns.resolve, addressRefusal: loopbackIsPublic },
      );
      expect(err.code).toBe("NETWORK_ERROR");
      expect(err.message).toMatch(new RegExp(`^request to secure\\.example:${port} failed: `));
      expect(dns.asked).toEqual(["secure.example"]);
    } finally {
      tls.closeAllConnections();
      tls.close();
    }
    expect(names).toEqual(["secure.example"]);
  });

  it("reports a name that does not resolve as NETWORK_ERROR", async () => {
    const dns = fakeDns({});
    const err = await failure({ url: "https://nowhere.example/" }, { ...GUARDED, resolve: dns.resolve });
    expect(err).toMatchObject({ code: "NETWORK_ERROR", message: "could not resolve nowhere.example (ENOTFOUND)" });
  });
});

describe("address classification", () => {
  it("allows public IPv4 and global unicast IPv6, including mapped and NAT64 forms of public IPv4", () => {
    for (const address of [
      "8.8.8.8",
      "1.1.1.1",
      "93.184.216.34",
      "172.32.0.1",
      "2606:4700:4700::1111",
      "2001:4860:4860::8888",
      "::ffff:8.8.8.8",
      "64:ff9b::808:808",
    ]) {
      expect(addressRefusal(address), address).toBeUndefined();
    }
  });

  it("refuses special-purpose addresses and names the reason", () => {
    const cases: Record<string, string> = {
      "127.0.0.1": "loopback",
      "::1": "loopback",
      "::ffff:127.0.0.1": "loopback",
      "::ffff:7f00:1": "loopback",
      "0.0.0.0": "unspecified",
      "::": "unspecified",
      "10.255.255.255": "private",
      "172.16.0.1": "private",
      "172.31.255.255": "private",
      "192.168.0.1": "private",
      "100.127.255.255": "shared (CGNAT)",
      "169.254.1.1": "link-local",
      "169.254.169.254": "cloud metadata",
      "fd00:ec2::254": "cloud metadata",
      "fc00::1": "unique-local",
      "fdff::1": "unique-local",
      "fe80::1%eth0": "link-local",
      "febf::1": "link-local",
      "ff02::1": "multicast",
      "224.0.0.251": "multicast",
      "240.0.0.1": "reserved",
      "255.255.255.255": "reserved",
      "64:ff9b::7f00:1": "loopback",
      "64:ff9b::a9fe:a9fe": "cloud metadata",
      "2002:a00:1::": "private",
      "2001:db8::1": "documentation",
      "::7f00:1": "IPv4-compatible (deprecated)",
      "example.com": "not an IP address",
    };
    for (const [address, why] of Object.entries(cases)) expect(addressRefusal(address), address).toBe(why);
  });
});
