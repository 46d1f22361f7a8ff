/**
 * Secret redaction over the real server (API.md §10.2, §18.3): an upstream echoes a secret back in every
 * encoded form §18.3 names (JSON-escaped, percent-encoded in both hex cases, base64 in both alphabets with and
 * without padding, inside a longer base64 text at each byte alignment, as an object key), a script logs those
 * forms and throws one of them; none reaches the execution record (outputs, keys, logs, errors), its list
 * element or the stream's frames, while the controls show the forms really were in the data.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json } from "../support/client";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";

const SECRET = 'p@ss "word"/+?=&é-1234';
const b64 = (s: string) => Buffer.from(s).toString("base64");
const b64url = (s: string) => Buffer.from(s).toString("base64url");
const FORMS: Record<string, string> = {
  raw: SECRET,
  jsonEscaped: JSON.stringify(SECRET).slice(1, -1),
  percentUpper: encodeURIComponent(SECRET),
  percentLower: encodeURIComponent(SECRET).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
  base64: b64(SECRET),
  base64Unpadded: b64(SECRET).replace(/=+$/, ""),
  base64Url: b64url(SECRET),
  basicAuth: `Basic ${b64(`user:${SECRET}`)}`,
  inside1: b64(`x${SECRET}yz`),
  inside2: b64(`xy${SECRET}z`),
};

let server: TestServer;
let bus: InProcessBus;
let upstream: Server;
let upstreamUrl: string;
let upstreamSawSecret = false;
const { call, ownerWithWallet } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  bus = setBus(withRunner(createInProcessBus()));
  server = await startTestServer(createServiceApp());
  upstream = createServer((req, res) => {
    upstreamSawSecret = req.headers["x-key"] === SECRET;
    res.setHeader("Content-Type", "application/json");
    // The forms as values, and the raw secret as an object key.
    res.end(`{${JSON.stringify(SECRET)}: "as a key", "forms": ${JSON.stringify(FORMS)}}`);
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await bus?.idle();
  await server?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** Every form, and the pieces of the inner base64 texts that carry only the secret's bits. */
function leaks(text: string): string[] {
  const found = Object.entries(FORMS)
    .filter(([, form]) => text.includes(form))
    .map(([name]) => name);
  if (text.includes(b64(SECRET).slice(0, 20))) found.push("base64 prefix");
  return found;
}

describe("redaction over the real server", () => {
  it("no encoded form of a secret reaches the record, the list or the stream", async () => {
    const owner = await ownerWithWallet();
    expect((await call(owner, "PUT", "/secrets/API_KEY", { value: SECRET })).status).toBe(201);
    const created = await call(owner, "POST", "/workflows", {
      smartWalletAddress: owner.wallet,
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [
        {
          id: "echo",
          name: "echo",
          type: "restApi",
          config: { url: `${upstreamUrl}/echo`, method: "GET", headers: { "X-Key": "{{secrets.API_KEY}}" } },
        },
        {
          id: "shout",
          name: "shout",
          type: "customCode",
          config: {
            source:
              "const f = echo.data.data.forms; for (const k in f) console.log(k, f[k]); throw new Error('leaked ' + f.percentLower + ' ' + f.basicAuth)",
          },
        },
      ],
      edges: [
        { id: "e1", source: "t", target: "echo" },
        { id: "e2", source: "echo", target: "shout" },
      ],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const started = await call(owner, "POST", `/workflows/${created.body.id}:trigger`, { triggerType: "manual", isBlocking: false });
    expect(started.status).toBe(202);
    const { executionId } = started.body;

    const stream = await fetch(`${server.url}/executions/${executionId}:stream?workflowId=${created.body.id}`, { headers: owner.headers });
    expect(stream.status).toBe(200);
    const frames = await stream.text(); // the server closes after the terminal frame
    expect(frames).toMatch(/"status":"failed"/);

    const record = await call(owner, "GET", `/executions/${executionId}?workflowId=${created.body.id}`);
    const list = await call(owner, "GET", `/workflows/${created.body.id}/executions`);
    const [, echo, shout] = record.body.steps as Json[];

    // Controls: the secret was sent, the forms were in the data, the script saw and logged them.
    expect(upstreamSawSecret).toBe(true);
    expect(Object.keys(echo!.output.data.data.forms)).toEqual(Object.keys(FORMS));
    expect(shout!.log.split("\n")).toHaveLength(Object.keys(FORMS).length);
    expect(shout!.error).toMatch(/^leaked \*\*\* Basic [A-Za-z0-9+/]*\*\*\*[A-Za-z0-9+/=]{0,4}$/); // an edge character mixing the secret with its neighbours may stay
    expect(leaks(Object.values(FORMS).join("\n"))).toEqual([...Object.keys(FORMS), "base64 prefix"]); // the check finds each form

    for (const [where, text] of [
      ["record", JSON.stringify(record.body)],
      ["list", JSON.stringify(list.body)],
      ["stream", frames],
    ] as const) {
      expect(leaks(text), where).toEqual([]);
    }
    expect(Object.keys(echo!.output.data.data)).toContain("***");
  }, 60_000);
});
