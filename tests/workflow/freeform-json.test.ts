/**
 * Free-form JSON (API.md §18.6, §18.2) over the real HTTP server: any object key a client sends inside
 * `settings`, `inputVariables`, manual `data`, `headers`, `pathParams`, restApi `headers` and ABI items (the empty
 * string, `__proto__`, `constructor`, `prototype`, dots, unicode, a lone surrogate) is stored and answered exactly
 * as sent, and a run reads it as data; nesting up to the body limit (512 levels) is stored whole, deeper bodies
 * (10,000 levels) are a clear 400; header names HTTP cannot carry fail the restApi step (INVALID_INPUT) at run,
 * not at create; workflow items and watch entries written before the JSON-text form still read back.
 *
 * Bodies are built as JSON text, never as object literals: in JavaScript `{"__proto__": x}` sets a prototype.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IncomingHttpHeaders } from "node:http";
import { DeleteCommand, GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { jsonClient, type Json, type Owner } from "../support/client";
import { canonicalJson } from "../../shared/workflow/create";
import { Keys } from "../../shared/store/item-keys";
import { watchersOf } from "../../shared/workflow/watch-registry";

let service: TestService;
let target: Upstream;
const received: { path: string; headers: IncomingHttpHeaders; rawHeaders: string[]; body: string }[] = [];
const { ownerWithWallet } = jsonClient(() => service.url);
/** Every status the service answered in this file: none may be 5xx. */
const statuses: { request: string; status: number }[] = [];

beforeAll(async () => {
  service = await startService();
  target = await startUpstream((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push({ path: req.url ?? "", headers: req.headers, rawHeaders: req.rawHeaders, body });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    });
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
  expect(statuses.filter((s) => s.status >= 500)).toEqual([]);
});

interface Answer {
  status: number;
  text: string;
  body: Json;
}

/** `body`: JSON text sent as it is, or a value sent as JSON. */
async function send(who: Owner, method: string, path: string, body?: string | Json): Promise<Answer> {
  const text = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(service.url + path, {
    method,
    headers: { ...who.headers, ...(text === undefined ? {} : { "Content-Type": "application/json" }) },
    body: text,
  });
  const answer = await res.text();
  statuses.push({ request: `${method} ${path}`, status: res.status });
  expect(res.status, answer.slice(0, 500)).toBeLessThan(500);
  return { status: res.status, text: answer, body: answer ? (JSON.parse(answer) as Json) : {} };
}

const expectSame = (actual: unknown, expected: unknown) => expect(canonicalJson(actual)).toBe(canonicalJson(expected));

// Keys that DynamoDB, the AWS marshaller, valibot or a careless `out[key] = value` would drop, refuse or misread.
const WEIRD_MEMBERS =
  `"":"empty","__proto__":{"polluted":true,"":[1,2]},"constructor":"ctor","prototype":{"constructor":{"prototype":1}},` +
  `"toString":"ts","hasOwnProperty":"hop","valueOf":{},"a.b":"dot","a[0]":"bracket","ключ 🔑":"unicode",` +
  `"\\u0000":"nul","\\ud800":"lone surrogate"," ":"space","{{x}}":"braces"`;
const WEIRD = `{${WEIRD_MEMBERS}}`;
/** The same keys with string values (header and path-parameter maps). */
const WEIRD_STRINGS = `{"":"a","__proto__":"b","constructor":"c","prototype":"d","bad name":"e","x:y":"f","ü":"g","a.b":"h"}`;

/** JSON text nested `levels` deep (objects under "" and arrays alternating), a leaf 1 at the bottom. */
function deep(levels: number): string {
  let open = "";
  let close = "";
  for (let i = 0; i < levels; i++) {
    open += i % 2 === 0 ? '{"":' : "[";
    close = (i % 2 === 0 ? "}" : "]") + close;
  }
  return open + "1" + close;
}

const code = (id: string, source: string) =>
  `{"id":"${id}","name":"${id}","type":"customCode","config":{"source":${JSON.stringify(source)}}}`;

/** A create body as text: `trigger` and `nodes` are JSON text; `inputVariables` too when given. */
function workflowText(wallet: string, parts: { trigger?: string; nodes?: string[]; inputVariables?: string; edges?: string }): string {
  const trigger = parts.trigger ?? `{"id":"t","name":"start","type":"manual","config":{}}`;
  const nodes = parts.nodes ?? [code("first", "return 1")];
  return (
    `{"name":"free-form","smartWalletAddress":"${wallet}","trigger":${trigger},"nodes":[${nodes.join(",")}]` +
    (parts.edges ? `,"edges":${parts.edges}` : "") +
    (parts.inputVariables ? `,"inputVariables":${parts.inputVariables}` : "") +
    "}"
  );
}

async function created(who: Owner, text: string): Promise<Json> {
  const res = await send(who, "POST", "/workflows", text);
  expect(res.status, res.text.slice(0, 500)).toBe(201);
  return res.body;
}

/** GET /workflows/{id} and the workflow's entry in GET /workflows, both equal to `expected` (the create answer). */
async function expectReadsBack(who: Owner, expected: Json) {
  const one = await send(who, "GET", `/workflows/${expected.id}`);
  expect(one.status).toBe(200);
  expectSame(one.body, expected);
  const page = await send(who, "GET", "/workflows?limit=100");
  expect(page.status).toBe(200);
  const listed = (page.body.data as Json[]).find((w) => w.id === expected.id);
  expect(listed).toBeDefined();
  expectSame(listed, expected);
}

async function runBlocking(who: Owner, workflowId: string, body: string = `{"triggerType":"manual","isBlocking":true}`): Promise<Json> {
  const res = await send(who, "POST", `/workflows/${workflowId}:trigger`, body);
  expect(res.status, res.text).toBe(200);
  for (let i = 0; i < 400; i++) {
    const execution = await send(who, "GET", `/executions/${res.body.executionId}?workflowId=${workflowId}`);
    expect(execution.status).toBe(200);
    if (execution.body.status !== "pending") return execution.body;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the execution did not finish");
}

const stepOf = (execution: Json, id: string): Json => (execution.steps as Json[]).find((s) => s.id === id)!;

// ---------------------------------------------------------------------------------------------------------

describe("keys inside free-form JSON are data", () => {
  it("stores settings, inputVariables, manual data, headers and pathParams exactly as sent, and answers them so from create, GET and list", async () => {
    const alice = await ownerWithWallet();
    const inputVariables =
      `{"settings":{${WEIRD_MEMBERS},"nested":${WEIRD}},"__proto__":${WEIRD},"constructor":{"prototype":${WEIRD}},` +
      `"prototype":[${WEIRD},"x"],"toString":"not a function","plain":${WEIRD}}`;
    const trigger =
      `{"id":"t","name":"start","type":"manual","config":{"data":{${WEIRD_MEMBERS},"list":[${WEIRD}]},` +
      `"headers":${WEIRD_STRINGS},"pathParams":${WEIRD_STRINGS}}}`;
    const wf = await created(alice, workflowText(alice.wallet, { trigger, inputVariables }));

    // The settings the service writes join the sent ones; everything else is the client's, member for member.
    const sentVariables = JSON.parse(inputVariables) as Json;
    const sentSettings = sentVariables.settings as Json;
    expectSame(wf.inputVariables.settings, { ...sentSettings, runner: alice.wallet, chainId: service.runtime.config.defaultChainId });
    expectSame({ ...wf.inputVariables, settings: null }, { ...sentVariables, settings: null });
    expectSame(wf.trigger, { ...JSON.parse(trigger), config: { ...JSON.parse(trigger).config, lang: "json" } });
    // JSON.parse on the client side defines `__proto__` as an own member: the answer really carries it.
    expect(Object.keys(wf.inputVariables)).toEqual(expect.arrayContaining(["__proto__", "constructor", "prototype", "toString"]));
    expect(Object.keys(wf.inputVariables.settings)).toEqual(expect.arrayContaining(["", "__proto__", "constructor", "\ud800"]));
    expect(wf.trigger.config.headers).toHaveProperty(["bad name"], "e");

    await expectReadsBack(alice, wf);
  });

  it("keeps ABI items and restApi headers as sent (event trigger: the watch entry too)", async () => {
    const alice = await ownerWithWallet();
    const abiItem = `{"type":"event","name":"Ping","inputs":[],"anonymous":false,${WEIRD_MEMBERS},"deep":${deep(40)}}`;
    const trigger =
      `{"id":"t","name":"start","type":"event","config":{"queries":[{"addresses":["0x000000000000000000000000000000000000dEaD"],` +
      `"contractAbi":[${abiItem}]}]}}`;
    const rest = `{"id":"call","name":"call","type":"restApi","config":{"url":"${target.url}/never","method":"GET","headers":${WEIRD_STRINGS}}}`;
    const wf = await created(alice, workflowText(alice.wallet, { trigger, nodes: [rest] }));
    expectSame(wf.trigger.config.queries[0].contractAbi, [JSON.parse(abiItem)]);
    expectSame(wf.nodes[0].config.headers, JSON.parse(WEIRD_STRINGS));
    await expectReadsBack(alice, wf);

    const entry = (await watchersOf(service.runtime.config.defaultChainId)).find((w) => w.workflowId === wf.id);
    expectSame(entry?.trigger, wf.trigger);
    expect((await send(alice, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
  });

  it("a run reads them as data: customCode and templates see own members, never Object.prototype's", async () => {
    const alice = await ownerWithWallet();
    const reader = code(
      "reader",
      `return { proto: settings["__proto__"], ctor: settings.constructor, prototype: settings.prototype, empty: settings[""],
        dot: settings["a.b"], uni: settings["ключ 🔑"], ts: settings.toString, hop: settings.hasOwnProperty, lone: settings["\\ud800"],
        dataProto: start.data["__proto__"], dataEmpty: start.data[""], header: start.headers[""], headerProto: start.headers["__proto__"],
        rootProto: typeof __proto__ === "object" ? __proto__ : "missing", rootCtor: constructor };`,
    );
    // Templates expand inside customCode sources too: strings inside quotes, objects as JSON literals.
    const templated = code(
      "templated",
      `return ["{{settings.constructor}}", "{{settings['']}}", "{{settings['a.b']}}", "{{settings.hasOwnProperty}}", {{settings['__proto__']}}, {{settings.prototype}}];`,
    );
    const echo =
      `{"id":"echo","name":"echo","type":"restApi","config":{"url":"${target.url}/echo","method":"POST",` +
      `"headers":{"X-Ctor":"{{settings.constructor}}","Content-Type":"application/json","__proto__":"proto header","constructor":"ctor header"},` +
      `"body":"{{settings['__proto__']}}"}}`;
    const wf = await created(
      alice,
      workflowText(alice.wallet, {
        trigger: `{"id":"t","name":"start","type":"manual","config":{"data":${WEIRD},"headers":${WEIRD_STRINGS}}}`,
        nodes: [reader, templated, echo],
        inputVariables: `{"settings":${WEIRD},"__proto__":{"root":"proto"},"constructor":{"root":"ctor"}}`,
      }),
    );
    const execution = await runBlocking(alice, wf.id);
    expect(execution.status, JSON.stringify(execution.steps)).toBe("success");

    const weird = JSON.parse(WEIRD) as Json;
    expectSame(stepOf(execution, "t").output, { data: weird, headers: JSON.parse(WEIRD_STRINGS), pathParams: {} });
    expectSame(stepOf(execution, "reader").output.data, {
      proto: weird["__proto__"],
      ctor: "ctor",
      prototype: weird.prototype,
      empty: "empty",
      dot: "dot",
      uni: "unicode",
      ts: "ts",
      hop: "hop",
      lone: "lone surrogate",
      dataProto: weird["__proto__"],
      dataEmpty: "empty",
      header: "a",
      headerProto: "b",
      rootProto: { root: "proto" },
      rootCtor: { root: "ctor" },
    });
    expectSame(stepOf(execution, "templated").output.data, ["ctor", "empty", "dot", "hop", weird["__proto__"], weird.prototype]);
    const request = received.find((r) => r.path === "/echo")!;
    expect(request.headers["x-ctor"]).toBe("ctor");
    // node's parser leaves `__proto__` out of `headers` (it assigns), so the raw list is read.
    const raw = Object.fromEntries(
      request.rawHeaders.flatMap((name, i) => (i % 2 === 0 ? [[name.toLowerCase(), request.rawHeaders[i + 1]]] : [])),
    );
    expect(raw).toHaveProperty(["__proto__"], "proto header");
    expect(raw).toHaveProperty(["constructor"], "ctor header");
    expectSame(JSON.parse(request.body), weird["__proto__"]);
  });

  it("triggerOutput and triggerInput keep such keys too, and the trigger step records them exactly", async () => {
    const alice = await ownerWithWallet();
    const wf = await created(
      alice,
      workflowText(alice.wallet, {
        nodes: [code("reader", `return { data: start.data, proto: __proto__, ctor: constructor.prototype };`)],
        inputVariables: `{"__proto__":"stored","constructor":{"prototype":"stored"}}`,
      }),
    );
    const body =
      `{"triggerType":"manual","isBlocking":true,"triggerOutput":{"data":${WEIRD},"headers":${WEIRD_STRINGS},"pathParams":${WEIRD_STRINGS}},` +
      `"triggerInput":{"__proto__":${WEIRD},"constructor":{"prototype":"sent"}}}`;
    const execution = await runBlocking(alice, wf.id, body);
    expect(execution.status, JSON.stringify(execution.steps)).toBe("success");
    const sent = JSON.parse(body) as Json;
    expectSame(stepOf(execution, "t").output, sent.triggerOutput);
    expectSame(stepOf(execution, "reader").output.data, { data: JSON.parse(WEIRD), proto: JSON.parse(WEIRD), ctor: "sent" });
  });

  it("a template naming a member the object does not own is unresolved, whatever Object.prototype has", async () => {
    const alice = await ownerWithWallet();
    const wf = await created(
      alice,
      workflowText(alice.wallet, { nodes: [code("reader", `return "{{settings.constructor}}";`)], inputVariables: `{"settings":{"x":1}}` }),
    );
    const execution = await runBlocking(alice, wf.id);
    expect(stepOf(execution, "reader")).toMatchObject({
      success: false,
      errorCode: "TEMPLATE_UNRESOLVED",
      error: "unresolved template variable: settings.constructor",
    });
  });
});

describe("nesting", () => {
  it("stores 33 levels (deeper than DynamoDB's 32) in settings, inputVariables and manual data, answers and runs them exactly", async () => {
    const alice = await ownerWithWallet();
    const inputVariables = `{"settings":{"deep":${deep(33)}},"deep":${deep(33)}}`;
    const trigger = `{"id":"t","name":"start","type":"manual","config":{"data":${deep(33)}}}`;
    const depth = code(
      "depth",
      `let d = start.data, n = 0; while (d !== null && typeof d === "object") { d = Array.isArray(d) ? d[0] : d[""]; n++; } return n;`,
    );
    const wf = await created(alice, workflowText(alice.wallet, { trigger, nodes: [depth], inputVariables }));
    expect(JSON.stringify(wf.inputVariables.deep)).toBe(deep(33));
    expect(JSON.stringify(wf.inputVariables.settings.deep)).toBe(deep(33));
    expect(JSON.stringify(wf.trigger.config.data)).toBe(deep(33));
    await expectReadsBack(alice, wf);

    const execution = await runBlocking(alice, wf.id);
    expect(execution.status, JSON.stringify(execution.steps).slice(0, 500)).toBe("success");
    expect(JSON.stringify(stepOf(execution, "t").output.data)).toBe(deep(33));
    expect(stepOf(execution, "depth").output.data).toBe(33);
  });

  it("accepts a body nested exactly 512 levels and refuses 513 and 10,000 levels with a clear 400 on every definition route", async () => {
    const alice = await ownerWithWallet();
    // body (1) → inputVariables (2) → x (3 …): a value of depth n makes a body of depth n + 2.
    const at = (n: number) => workflowText(alice.wallet, { inputVariables: `{"x":${deep(n)}}` });
    const wf = await created(alice, at(510));
    expect(JSON.stringify(wf.inputVariables.x)).toBe(deep(510));
    await expectReadsBack(alice, wf);

    const refusal = { code: "VALIDATION_FAILED", errors: [{ path: "body", message: "is nested more than 512 levels deep" }] };
    for (const levels of [511, 9_998]) {
      for (const path of ["/workflows", "/workflows:simulate", "/workflows:estimateFees"]) {
        const res = await send(alice, "POST", path, at(levels));
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject(refusal);
      }
    }
    const trigger = await send(
      alice,
      "POST",
      `/workflows/${wf.id}:trigger`,
      `{"triggerType":"manual","triggerOutput":{"data":${deep(9_997)}}}`,
    );
    expect(trigger.status).toBe(400);
    expect(trigger.body).toMatchObject(refusal);
  });

  it("runs a manual payload near the limit: the trigger step and the node see it whole", async () => {
    const alice = await ownerWithWallet();
    const depth = code(
      "depth",
      `let d = start.data, n = 0; while (d !== null && typeof d === "object") { d = Array.isArray(d) ? d[0] : d[""]; n++; } return n;`,
    );
    const wf = await created(alice, workflowText(alice.wallet, { nodes: [depth] }));
    // body (1) → triggerOutput (2) → data (3 …)
    const execution = await runBlocking(alice, wf.id, `{"triggerType":"manual","isBlocking":true,"triggerOutput":{"data":${deep(510)}}}`);
    expect(execution.status, JSON.stringify(execution.steps).slice(0, 500)).toBe("success");
    expect(JSON.stringify(stepOf(execution, "t").output.data)).toBe(deep(510));
    expect(stepOf(execution, "depth").output.data).toBe(510);
  });
});

describe("header and path-parameter names HTTP cannot carry", () => {
  it("are stored at create and fail the restApi step with INVALID_INPUT at run, nothing sent", async () => {
    const alice = await ownerWithWallet();
    for (const name of ["", "bad name", "x:y", "ü", "a\r\nb"]) {
      const headers = `{${JSON.stringify(name)}:"v"}`;
      const rest = `{"id":"call","name":"call","type":"restApi","config":{"url":"${target.url}/refused","method":"GET","headers":${headers}}}`;
      const wf = await created(alice, workflowText(alice.wallet, { nodes: [rest] }));
      expectSame(wf.nodes[0].config.headers, JSON.parse(headers));
      const execution = await runBlocking(alice, wf.id);
      expect(execution.status).toBe("failed");
      expect(stepOf(execution, "call")).toMatchObject({ success: false, errorCode: "INVALID_INPUT" });
    }
    expect(received.filter((r) => r.path === "/refused")).toEqual([]);
  });
});

describe("the definition in an item of its own (store pattern 10b)", () => {
  it("a run's step names its node's config in the definition instead of copying it, and has it back after a delete", async () => {
    const alice = await ownerWithWallet();
    const source = `return 1 // ${"x".repeat(60_000)}`;
    const wf = await created(alice, workflowText(alice.wallet, { nodes: [code("first", source)] }));
    const execution = await runBlocking(alice, wf.id as string);
    expect(stepOf(execution, "first").config).toMatchObject({ source });

    // The step item holds `config: null` and the workflow it names, a few hundred bytes instead of 60 KB.
    const { tableName } = service.runtime.config;
    const part = (
      await service.runtime.db.send(
        new GetCommand({ TableName: tableName, Key: Keys.executionStep(execution.id as string, "first", 0), ConsistentRead: true }),
      )
    ).Item!;
    const stored = JSON.parse(Buffer.from(part.body as Uint8Array).toString("utf8")) as { step: Json; configIn?: string };
    expect(stored.step.config).toBeNull();
    expect(stored.configIn).toBe(wf.id);
    expect((part.body as Uint8Array).byteLength).toBeLessThan(1_000);

    expect((await send(alice, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
    expect((await send(alice, "GET", `/workflows/${wf.id}`)).status).toBe(404);
    const after = await send(alice, "GET", `/executions/${execution.id}?workflowId=${wf.id}`);
    expect(after.status).toBe(200);
    expectSame(after.body, execution);
  });
});

describe("items stored before the JSON-text form", () => {
  it("a workflow item with its document as DynamoDB maps reads back, lists and runs as before", async () => {
    const alice = await ownerWithWallet();
    const wf = await created(
      alice,
      workflowText(alice.wallet, {
        trigger: `{"id":"t","name":"start","type":"manual","config":{"data":{"hello":"world"}}}`,
        nodes: [code("first", "return start.data.hello + ' ' + settings.mode")],
        inputVariables: `{"settings":{"mode":"old"},"list":[1,{"a":null}]}`,
      }),
    );
    // Rewrite the item the way version 1 stored it: the members as maps and lists, no `document`, no definition item.
    const { tableName } = service.runtime.config;
    const get = async (Key: Record<string, string>) =>
      (await service.runtime.db.send(new GetCommand({ TableName: tableName, Key, ConsistentRead: true }))).Item!;
    const item = await get(Keys.workflow(wf.id));
    expect(item).toMatchObject({ v: 3 });
    const definition = await get(Keys.workflowDefinition(wf.id));
    expect(definition).toMatchObject({ v: 1, document: expect.any(String) });
    await service.runtime.db.send(new DeleteCommand({ TableName: tableName, Key: Keys.workflowDefinition(wf.id) }));
    await service.runtime.db.send(
      new PutCommand({ TableName: tableName, Item: { ...item, ...JSON.parse(definition.document as string), v: 1 } }),
    );

    await expectReadsBack(alice, wf);
    const execution = await runBlocking(alice, wf.id);
    expect(execution.status).toBe("success");
    expect(stepOf(execution, "first").output.data).toBe("world old");
    expect((await send(alice, "GET", `/workflows/${wf.id}`)).body).toMatchObject({ executionCount: 1 });
  });

  it("a watch entry holding its trigger as a map is still served", async () => {
    const chainId = service.runtime.config.defaultChainId;
    const id = "01JD7Q0S7W3C2Y8K5N6M4P1R9T";
    const trigger = { id: "t", name: "start", type: "block", config: { interval: 100 } };
    await service.runtime.db.send(
      new PutCommand({
        TableName: service.runtime.config.tableName,
        Item: { ...Keys.watch(id), ...Keys.watchByChain(chainId, id), type: "watch", v: 1, workflowId: id, chainId, trigger, since: 1 },
      }),
    );
    expect((await watchersOf(chainId)).find((w) => w.workflowId === id)?.trigger).toEqual(trigger);
  });
});
