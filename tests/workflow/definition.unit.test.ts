/**
 * Validating a workflow definition (API.md §8.3-§8.7): for each rule an accepted and a refused case, the codes
 * and FieldError paths of each item, all field errors of items 1-4 together, the normalised definition and the
 * compiled graph. Pure: no server, no table, no chain.
 */
import { describe, expect, it } from "vitest";
import { ApiError, type FieldError } from "../../shared/errors";
import { validateDefinition } from "../../shared/workflow/definition";
import { PATHS_ONLY_MESSAGE, RESERVED_WORDS } from "../../shared/templates";
import { cronFires } from "../../shared/workflow/chain-rules";
import { type Mode, type ValidateOptions } from "../../shared/workflow/definition-types";
import { DEFAULT_LIMITS, type DefinitionLimits } from "../../shared/kinds/support/schema-kit";

const NOW = Date.UTC(2026, 0, 1, 12);
const WALLET = "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4";
const OTHER = "0xAb8483F64d9C6d1EcF9b849Ae677dD3315835cb2";
const ZERO = "0x0000000000000000000000000000000000000000";
const TOPIC = `0x${"dd".repeat(32)}`;
const ERC20_ABI = [
  {
    type: "function",
    name: "transfer",
    inputs: [
      { name: "to", type: "address" },
      { name: "amount", type: "uint256" },
    ],
    outputs: [{ type: "bool" }],
  },
  { type: "function", name: "balanceOf", inputs: [{ name: "owner", type: "address" }], outputs: [{ type: "uint256" }] },
  { type: "function", name: "mint", inputs: [{ name: "amount", type: "uint256" }] },
  {
    type: "function",
    name: "mint",
    inputs: [
      { name: "to", type: "address" },
      { name: "amount", type: "uint256" },
    ],
  },
  { type: "function", name: "pay", inputs: [{ name: "a", type: "uint256" }] },
  { type: "function", name: "pay", inputs: [{ name: "b", type: "address" }] },
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256" },
    ],
  },
  { type: "event", name: "Anon", inputs: [{ name: "", type: "uint256" }] },
];

type Body = Record<string, unknown>;
const options = <M extends Mode = "create">(mode: M = "create" as M, extra: Partial<ValidateOptions<Mode>> = {}): ValidateOptions<M> => ({
  now: NOW,
  limits: DEFAULT_LIMITS,
  chains: [{ chainId: 1 }, { chainId: 8453 }, { chainId: 31337 }, { chainId: 10, blockTimeSeconds: 6 }],
  defaultChainId: 31337,
  newId: () => "trig",
  ...extra,
  mode,
});

const manual = (config: Body = {}) => ({ name: "start", type: "manual", config });
const code = (id: string, source = "return 1", name = id) => ({ id, name, type: "customCode", config: { source } });
const node = (id: string, type: string, config: Body, name = id) => ({ id, name, type, config });
const body = (extra: Body = {}): Body => ({ smartWalletAddress: WALLET.toLowerCase(), trigger: manual(), nodes: [code("a")], ...extra });
const withTrigger = (type: string, config: Body, extra: Body = {}) => body({ trigger: { name: "start", type, config }, ...extra });
const withNode = (n: Body, extra: Body = {}) => body({ nodes: [n], ...extra });

function accept<M extends Mode = "create">(input: Body, mode: M = "create" as M, extra: Partial<ValidateOptions<Mode>> = {}) {
  return validateDefinition(input, options(mode, extra));
}
function refuse(input: Body, mode: Mode = "create", extra: Partial<ValidateOptions<Mode>> = {}): { code: string; errors: FieldError[] } {
  try {
    validateDefinition(input, options(mode, extra));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    expect(e.status).toBe(400);
    return { code: e.code, errors: e.extra.errors ?? [] };
  }
  throw new Error("expected the definition to be refused");
}
/** Refused with `code`, and one of the errors is at `path` (with `message` when given). */
function refusedAt(
  input: Body,
  code: string,
  path: string,
  message?: string | RegExp,
  mode: Mode = "create",
  extra: Partial<ValidateOptions<Mode>> = {},
) {
  const r = refuse(input, mode, extra);
  expect(r.code).toBe(code);
  const hit = r.errors.find((e) => e.path === path);
  expect(hit, `no error at ${path}: ${JSON.stringify(r.errors)}`).toBeDefined();
  if (typeof message === "string") expect(hit!.message).toBe(message);
  else if (message) expect(hit!.message).toMatch(message);
  return r;
}
const invalid = (input: Body, path: string, message?: string | RegExp, mode: Mode = "create") =>
  refusedAt(input, "VALIDATION_FAILED", path, message, mode);

// ---------------------------------------------------------------------------------------------------------

describe("§8.3 trigger envelope", () => {
  it("assigns a ULID to a trigger sent without an id, and keeps a given one", () => {
    const { definition } = validateDefinition(body(), { ...options(), newId: undefined });
    expect(definition.trigger.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(accept(body({ trigger: { id: "t-1", ...manual() } })).definition.trigger.id).toBe("t-1");
  });

  it("refuses a malformed id, a name that is not an identifier or is reserved, an unknown type, a missing config", () => {
    invalid(body({ trigger: { id: "a b", ...manual() } }), "body.trigger.id");
    invalid(
      body({ trigger: { ...manual(), name: "1st" } }),
      "body.trigger.name",
      "must be a JavaScript identifier that is not a reserved word",
    );
    invalid(body({ trigger: { ...manual(), name: "value" } }), "body.trigger.name");
    invalid(body({ trigger: { name: "start", type: "webhook", config: {} } }), "body.trigger.type");
    invalid(body({ trigger: { name: "start", type: "manual" } }), "body.trigger.config");
    invalid(body({ trigger: { ...manual(), extra: 1 } }), "body.trigger.extra", "is not a known member");
  });
});

describe("§8.3.1 manual", () => {
  it("defaults lang to json and accepts any JSON data, headers and pathParams", () => {
    const { definition } = accept(withTrigger("manual", { data: { a: [1, null] }, headers: { "X-A": "b" }, pathParams: { id: "1" } }));
    expect(definition.trigger.config).toEqual({ data: { a: [1, null] }, headers: { "X-A": "b" }, pathParams: { id: "1" }, lang: "json" });
  });

  it("treats a config member sent as null as absent", () => {
    expect(accept(withTrigger("manual", { data: null, lang: null })).definition.trigger.config).toEqual({ lang: "json" });
  });

  it("refuses more than 50 headers, a non-string header, an unknown lang and an unknown member", () => {
    const headers = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`h${i}`, "v"]));
    invalid(withTrigger("manual", { headers }), "body.trigger.config.headers", "must have at most 50 entries");
    invalid(withTrigger("manual", { pathParams: { a: 1 } }), "body.trigger.config.pathParams.a");
    invalid(withTrigger("manual", { lang: "python" }), "body.trigger.config.lang");
    invalid(withTrigger("manual", { webhook: true }), "body.trigger.config.webhook", "is not a known member");
  });

  it("limits data to max_manual_data_bytes serialized", () => {
    const limits: DefinitionLimits = { ...DEFAULT_LIMITS, maxManualDataBytes: 20 };
    expect(validateDefinition(withTrigger("manual", { data: "x".repeat(18) }), { ...options(), limits })).toBeDefined();
    const r = refuse(withTrigger("manual", { data: "x".repeat(19) }), "create", { limits });
    expect(r.errors).toEqual([{ path: "body.trigger.config.data", message: "must be at most 20 bytes serialized" }]);
  });

  it("requires data to be a string with lang javascript", () => {
    accept(withTrigger("manual", { lang: "javascript", data: "return 1" }));
    invalid(withTrigger("manual", { lang: "javascript", data: { a: 1 } }), "body.trigger.config.data", /must be a string/);
  });
});

describe("§8.3.2 fixedTime", () => {
  it("accepts an epoch after now inside [startAt, expiredAt)", () => {
    accept(withTrigger("fixedTime", { epochs: [NOW - 1000, NOW + 60_000] }));
    accept(withTrigger("fixedTime", { epochs: [NOW + 60_000] }, { startAt: NOW + 60_000, expiredAt: NOW + 120_000 }));
  });

  it("refuses 0 or more than 1000 epochs, and epochs that are not integers", () => {
    invalid(withTrigger("fixedTime", { epochs: [] }), "body.trigger.config.epochs", "must not be empty");
    invalid(withTrigger("fixedTime", { epochs: Array.from({ length: 1001 }, (_, i) => NOW + i + 1) }), "body.trigger.config.epochs");
    invalid(withTrigger("fixedTime", { epochs: [NOW + 1.5] }), "body.trigger.config.epochs[0]", "must be an integer");
    invalid(withTrigger("fixedTime", { epochs: ["1"] }), "body.trigger.config.epochs[0]");
  });

  it("refuses at create when no epoch is after now and inside [startAt, expiredAt); simulate does not apply it", () => {
    const past = withTrigger("fixedTime", { epochs: [NOW - 1] });
    invalid(past, "body.trigger.config.epochs", "must include an epoch after now and inside [startAt, expiredAt)");
    invalid(withTrigger("fixedTime", { epochs: [NOW + 120_000] }, { expiredAt: NOW + 120_000 }), "body.trigger.config.epochs");
    invalid(withTrigger("fixedTime", { epochs: [NOW + 1000] }, { startAt: NOW + 2000 }), "body.trigger.config.epochs");
    const { smartWalletAddress: _, ...definition } = past;
    accept({ ...definition, inputVariables: {} }, "simulate");
  });
});

describe("§8.3.3 cron", () => {
  it("accepts names, lists, ranges, steps, 0-7 day of week and the descriptors, with timezone defaulting to UTC", () => {
    const { definition } = accept(
      withTrigger("cron", { schedules: ["0 9 * * MON-FRI", "30 18 1,15 jan,Jul *", "0 0 * * 7", "@daily", "@weekly"] }),
    );
    expect(definition.trigger.config).toMatchObject({ timezone: "UTC" });
    accept(withTrigger("cron", { schedules: ["@yearly", "@annually", "@monthly", "@hourly"], timezone: "Europe/Paris" }));
    accept(withTrigger("cron", { schedules: ["0 0 1-31/2 * *"] }));
  });

  it("refuses other expressions: six fields, L/W/#/?, out-of-range values, @midnight, never firing", () => {
    for (const bad of [
      "* * * * * *",
      "0 0 L * *",
      "0 0 15W * *",
      "0 0 * * MON#2",
      "0 0 ? * *",
      "60 * * * *",
      "0 24 * * *",
      "0 0 * * 8",
      "0 0 * 13 *",
      "@midnight",
      "@reboot",
      "5/5 * * * *",
      "0 0 30 2 *",
      "",
      "every day",
    ]) {
      invalid(withTrigger("cron", { schedules: [bad] }), "body.trigger.config.schedules[0]", /^must be a cron expression/);
    }
  });

  it("refuses 0 or more than 10 schedules and an unknown time zone", () => {
    invalid(withTrigger("cron", { schedules: [] }), "body.trigger.config.schedules");
    invalid(withTrigger("cron", { schedules: Array.from({ length: 11 }, (_, i) => `${i} 0 * * *`) }), "body.trigger.config.schedules");
    invalid(withTrigger("cron", { schedules: ["0 0 * * *"], timezone: "Mars/Olympus" }), "body.trigger.config.timezone");
    invalid(withTrigger("cron", { schedules: ["0 0 * * *"], timezone: "+02:00" }), "body.trigger.config.timezone");
  });

  it("frequency floor: `* * * * *` and `*/4 * * * *` are refused, `*/5 * * * *` is accepted", () => {
    refusedAt(withTrigger("cron", { schedules: ["* * * * *"] }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.schedules[0]", /60 s apart/);
    refusedAt(
      withTrigger("cron", { schedules: ["*/4 * * * *"] }),
      "TRIGGER_TOO_FREQUENT",
      "body.trigger.config.schedules[0]",
      /240 s apart.*minimum is 300 s/,
    );
    accept(withTrigger("cron", { schedules: ["*/5 * * * *"] }));
  });

  it("frequency floor applies to the union of the schedules", () => {
    accept(withTrigger("cron", { schedules: ["0 * * * *", "30 * * * *"] }));
    refusedAt(
      withTrigger("cron", { schedules: ["0 * * * *", "2 * * * *"] }),
      "TRIGGER_TOO_FREQUENT",
      "body.trigger.config.schedules",
      /120 s apart/,
    );
    // The same instant from two schedules is one fire.
    accept(withTrigger("cron", { schedules: ["0 * * * *", "0 */2 * * *"] }));
  });

  it("frequency floor looks at every fire of a whole cycle (§18.4), not the next 64; the message names the first pair from now", () => {
    // Every minute on June 1: beyond the first 64 fires of the union with a daily schedule (64 days from January 1).
    refusedAt(
      withTrigger("cron", { schedules: ["0 0 * * *", "* * 1 6 *"] }),
      "TRIGGER_TOO_FREQUENT",
      "body.trigger.config.schedules[1]",
      /^fires 60 s apart \(2026-06-01T00:00:00.000Z and 2026-06-01T00:01:00.000Z\); the minimum is 300 s$/,
    );
    refusedAt(withTrigger("cron", { schedules: ["* * 1 6 *"] }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.schedules[0]");
  });

  it("frequency floor is a create rule: simulate and estimateFees accept `* * * * *`", () => {
    const { smartWalletAddress: _, ...definition } = withTrigger("cron", { schedules: ["* * * * *"] });
    accept({ ...definition, inputVariables: {} }, "simulate");
    accept({ ...definition, createdAt: NOW, expireAt: NOW + 1, maxExecution: 1 }, "estimateFees");
  });

  it("frequency floor in a time zone: a daylight-saving change can bring two fires closer than 300 s", () => {
    // America/New_York, 2026-03-08: 01:59 EST is 06:59Z and 03:02 EDT is 07:02Z, three minutes later.
    const schedules = ["59 1 * * *", "2 3 * * *"];
    const now = Date.UTC(2026, 2, 7, 12);
    const refusedInNewYork = (at: number, apart: RegExp) =>
      refusedAt(
        withTrigger("cron", { schedules, timezone: "America/New_York" }),
        "TRIGGER_TOO_FREQUENT",
        "body.trigger.config.schedules",
        apart,
        "create",
        { now: at },
      );
    refusedInNewYork(now, /180 s apart \(2026-03-08T06:59:00.000Z and 2026-03-08T07:02:00.000Z\)/);
    accept(withTrigger("cron", { schedules, timezone: "UTC" }), "create", { now });
    // The change comes back every year: after this year's, next year's is refused.
    refusedInNewYork(Date.UTC(2026, 3, 1), /180 s apart \(2027-03-14T06:59:00.000Z and 2027-03-14T07:02:00.000Z\)/);
  });

  it("frequency floor in a time zone: a skipped local time does not fire, a repeated one fires once", () => {
    // 02:30 does not exist on 2026-03-08 in New York; a scheduler running it at 03:00 would be 2 minutes before 03:02.
    accept(withTrigger("cron", { schedules: ["30 2 * * *", "2 3 * * *"], timezone: "America/New_York" }), "create", {
      now: Date.UTC(2026, 2, 7, 12),
    });
    // 01:02 and 01:58 happen twice on 2026-11-01; the second 01:02 would be 4 minutes after the first 01:58.
    accept(withTrigger("cron", { schedules: ["2,58 1 * * *"], timezone: "America/New_York" }), "create", {
      now: Date.UTC(2026, 9, 31, 12),
    });
  });
});

describe("cron fire instants", () => {
  const iso = (fires: { at: number }[]) => fires.map((f) => new Date(f.at).toISOString());

  it("skips a local time that a spring-forward change removes", () => {
    const fires = cronFires(["30 2 * * *"], "America/New_York", Date.UTC(2026, 2, 7, 12), 2);
    expect(iso(fires)).toEqual(["2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"]);
  });

  it("fires a repeated local time once, at its first occurrence", () => {
    expect(iso(cronFires(["30 1 * * *"], "America/New_York", Date.UTC(2026, 10, 1, 4), 1))).toEqual(["2026-11-01T05:30:00.000Z"]);
    expect(iso(cronFires(["*/30 * * * *"], "America/New_York", Date.UTC(2026, 10, 1, 4, 45), 4))).toEqual([
      "2026-11-01T05:00:00.000Z", // 01:00 EDT
      "2026-11-01T05:30:00.000Z", // 01:30 EDT
      "2026-11-01T07:00:00.000Z", // 02:00 EST (01:00 and 01:30 EST are repeats)
      "2026-11-01T07:30:00.000Z",
    ]);
    // Every minute: the whole second pass of the repeated hour is skipped.
    expect(iso(cronFires(["* * * * *"], "America/New_York", Date.UTC(2026, 10, 1, 5, 58), 2))).toEqual([
      "2026-11-01T05:59:00.000Z", // 01:59 EDT
      "2026-11-01T07:00:00.000Z", // 02:00 EST
    ]);
  });

  it("reads day of week 0 and 7 both as Sunday", () => {
    const from = Date.UTC(2026, 0, 1);
    expect(iso(cronFires(["0 0 * * 7"], "UTC", from, 3))).toEqual(iso(cronFires(["0 0 * * 0"], "UTC", from, 3)));
    expect(iso(cronFires(["0 0 * * 0"], "UTC", from, 1))).toEqual(["2026-01-04T00:00:00.000Z"]);
  });

  it("matches either day of month or day of week when both are restricted, and only the restricted one otherwise", () => {
    const from = Date.UTC(2026, 0, 25);
    expect(iso(cronFires(["0 0 1 * MON"], "UTC", from, 4))).toEqual([
      "2026-01-26T00:00:00.000Z", // Monday
      "2026-02-01T00:00:00.000Z", // the 1st (a Sunday)
      "2026-02-02T00:00:00.000Z",
      "2026-02-09T00:00:00.000Z",
    ]);
    expect(iso(cronFires(["0 0 1 * *"], "UTC", from, 2))).toEqual(["2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]);
    expect(iso(cronFires(["0 0 * * MON"], "UTC", from, 2))).toEqual(["2026-01-26T00:00:00.000Z", "2026-02-02T00:00:00.000Z"]);
  });
});

describe("§8.3.4 block", () => {
  it("on chain 1 (12 s blocks) needs an interval of at least 5; on 8453 (2 s) at least 30", () => {
    refusedAt(withTrigger("block", { interval: 4, chainId: 1 }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.interval", /at least 5$/);
    accept(withTrigger("block", { interval: 5, chainId: 1 }));
    refusedAt(
      withTrigger("block", { interval: 29, chainId: 8453 }),
      "TRIGGER_TOO_FREQUENT",
      "body.trigger.config.interval",
      /at least 30$/,
    );
    accept(withTrigger("block", { interval: 30, chainId: 8453 }));
  });

  it("uses the workflow chain when the trigger has none, a configured block time, and 1 s for other chains", () => {
    refusedAt(withTrigger("block", { interval: 4 }, { chainId: 1 }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.interval");
    accept(withTrigger("block", { interval: 5, chainId: 0 }, { chainId: 1 }));
    refusedAt(withTrigger("block", { interval: 59 }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.interval", /31337/);
    accept(withTrigger("block", { interval: 60 }));
    // chain 10 is configured here with 6 s blocks instead of the table's 2 s.
    refusedAt(withTrigger("block", { interval: 9, chainId: 10 }), "TRIGGER_TOO_FREQUENT", "body.trigger.config.interval", /at least 10$/);
    accept(withTrigger("block", { interval: 10, chainId: 10 }));
  });

  it("refuses an interval below 1 or not an integer", () => {
    invalid(withTrigger("block", { interval: 0 }), "body.trigger.config.interval", "must be at least 1");
    invalid(withTrigger("block", { interval: 1.5 }), "body.trigger.config.interval", "must be an integer");
    invalid(withTrigger("block", {}), "body.trigger.config.interval");
  });
});

describe("§8.3.5 event", () => {
  const query = (q: Body) => withTrigger("event", { queries: [q] });

  it("accepts an address or a topics[0], fills in cooldownSeconds 0 and maxEventsPerBlock 100, returns addresses in EIP-55", () => {
    const { definition } = accept(query({ addresses: [WALLET.toLowerCase()] }));
    expect(definition.trigger.config).toEqual({ queries: [{ addresses: [WALLET], maxEventsPerBlock: 100 }], cooldownSeconds: 0 });
    accept(query({ topics: [TOPIC, null, ""] }));
    accept(query({ addresses: [WALLET], topics: [null, TOPIC] }));
  });

  it("refuses a query with neither an address nor a non-null topics[0]", () => {
    invalid(query({}), "body.trigger.config.queries[0]", "must set at least one address or a non-null topics[0]");
    invalid(query({ topics: [null, TOPIC] }), "body.trigger.config.queries[0]");
    invalid(query({ topics: ["", TOPIC], addresses: [] }), "body.trigger.config.queries[0]");
  });

  it("refuses bad shapes: topics, counts, cooldown, maxEventsPerBlock", () => {
    invalid(query({ topics: ["0x12"] }), "body.trigger.config.queries[0].topics[0]");
    invalid(query({ topics: [TOPIC, null, null, null, null] }), "body.trigger.config.queries[0].topics", "must have at most 4 topics");
    invalid(query({ addresses: Array(101).fill(WALLET) }), "body.trigger.config.queries[0].addresses");
    invalid(
      query({ addresses: ["0x5B38Da6a701c568545dCfcB03FcB875f56beddc4"] }),
      "body.trigger.config.queries[0].addresses[0]",
      "has an invalid EIP-55 checksum",
    );
    invalid(withTrigger("event", { queries: [] }), "body.trigger.config.queries");
    invalid(withTrigger("event", { queries: [{ topics: [TOPIC] }], cooldownSeconds: 86_401 }), "body.trigger.config.cooldownSeconds");
    accept(withTrigger("event", { queries: [{ topics: [TOPIC] }], cooldownSeconds: 86_400 }));
    invalid(query({ topics: [TOPIC], maxEventsPerBlock: 0 }), "body.trigger.config.queries[0].maxEventsPerBlock");
    invalid(query({ topics: [TOPIC], maxEventsPerBlock: 10_001 }), "body.trigger.config.queries[0].maxEventsPerBlock");
  });

  it("requires contractAbi with conditions, and conditions naming an event argument of the ABI", () => {
    const condition = { fieldName: "Transfer.value", operator: "gt", value: "100" };
    accept(query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [condition, { fieldName: "to", operator: "eq", value: WALLET }] }));
    accept(
      query({
        topics: [TOPIC],
        contractAbi: ERC20_ABI,
        conditions: [{ fieldName: "Anon.arg0", operator: "gte", value: "1", fieldType: "uint256" }],
      }),
    );
    invalid(
      query({ topics: [TOPIC], conditions: [condition] }),
      "body.trigger.config.queries[0].contractAbi",
      "is required when conditions are set",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ ...condition, fieldName: "Transfer.amount" }] }),
      "body.trigger.config.queries[0].conditions[0].fieldName",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ ...condition, fieldName: "Approval.value" }] }),
      "body.trigger.config.queries[0].conditions[0].fieldName",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ fieldName: "to", operator: "gt", value: WALLET }] }),
      "body.trigger.config.queries[0].conditions[0].operator",
      "must be eq or ne for an address",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ ...condition, operator: "like" }] }),
      "body.trigger.config.queries[0].conditions[0].operator",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ ...condition, value: 100 }] }),
      "body.trigger.config.queries[0].conditions[0].value",
    );
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, conditions: [{ ...condition, fieldType: "uint7" }] }),
      "body.trigger.config.queries[0].conditions[0].fieldType",
    );
  });

  it("checks method calls against the ABI, and never expands templates in trigger configs", () => {
    accept(query({ topics: [TOPIC], contractAbi: ERC20_ABI, methodCalls: [{ methodName: "balanceOf", methodParams: ["{{x}}"] }] }));
    invalid(
      query({ topics: [TOPIC], contractAbi: ERC20_ABI, methodCalls: [{ methodName: "totalSupply" }] }),
      "body.trigger.config.queries[0].methodCalls[0].methodName",
    );
    invalid(
      query({ topics: [TOPIC], methodCalls: [{ methodName: "x", contractAddress: "{{a.b}}" }] }),
      "body.trigger.config.queries[0].methodCalls[0].contractAddress",
    );
  });
});

describe("§8.4 node envelope", () => {
  it("refuses a missing or malformed id, a bad name, an unknown type, a missing config, an unknown member", () => {
    invalid(withNode({ name: "a", type: "customCode", config: { source: "1" } }), "body.nodes[0].id");
    invalid(withNode(code("x".repeat(65))), "body.nodes[0].id");
    invalid(withNode(code("a.b")), "body.nodes[0].id");
    invalid(withNode(code("a", "1", "my-node")), "body.nodes[0].name", "must be a JavaScript identifier that is not a reserved word");
    invalid(withNode(code("a", "1", "n".repeat(65))), "body.nodes[0].name");
    invalid(withNode(node("a", "approval", {})), "body.nodes[0].type", /^must be one of ethTransfer, contractWrite.*, balance, await$/);
    invalid(withNode({ id: "a", name: "a", type: "customCode" }), "body.nodes[0].config");
    invalid(withNode({ ...code("a"), position: 1 }), "body.nodes[0].position", "is not a known member");
  });

  it("refuses an array where an object is expected, even when every member is optional", () => {
    invalid(withTrigger("manual", [] as unknown as Body), "body.trigger.config", "must be an object");
    invalid(withTrigger("event", { queries: [[]] }), "body.trigger.config.queries[0]", "must be an object");
    invalid(
      withNode(node("r", "restApi", { url: "https://x", method: "GET", headers: [] })),
      "body.nodes[0].config.headers",
      "must be an object of strings",
    );
    invalid(body({ inputVariables: [] }), "body.inputVariables", "must be an object");
  });
});

describe("§8.4.1 ethTransfer", () => {
  const transfer = (config: Body) => withNode(node("send", "ethTransfer", config));

  it("accepts an address (stored in EIP-55), a wei amount, max and templates", () => {
    const { definition } = accept(transfer({ destination: OTHER.toLowerCase(), amount: "1000000000000000000" }));
    expect(definition.nodes[0]!.config).toEqual({ destination: OTHER, amount: "1000000000000000000" });
    accept(transfer({ destination: "{{ settings.runner }}", amount: "max" }));
    accept(transfer({ destination: OTHER, amount: "{{start.data.amount}}", chainId: 8453 }));
  });

  it("refuses the zero address, a bad checksum, zero, non-canonical and too large amounts, expressions", () => {
    invalid(transfer({ destination: ZERO, amount: "1" }), "body.nodes[0].config.destination", "must not be the zero address");
    invalid(
      transfer({ destination: "0xAb8483F64d9C6d1EcF9b849Ae677dD3315835cB2", amount: "1" }),
      "body.nodes[0].config.destination",
      "has an invalid EIP-55 checksum",
    );
    invalid(
      transfer({ destination: "0x1234", amount: "1" }),
      "body.nodes[0].config.destination",
      "must be an address or a {{ path }} template",
    );
    for (const amount of ["0", "01", "-1", "1.5", "0x10", String(2n ** 256n), ""]) {
      invalid(transfer({ destination: OTHER, amount }), "body.nodes[0].config.amount");
    }
    invalid(transfer({ destination: OTHER, amount: "{{ start.data.amount * 2 }}" }), "body.nodes[0].config.amount", PATHS_ONLY_MESSAGE);
    invalid(transfer({ destination: OTHER }), "body.nodes[0].config.amount");
  });
});

describe("§8.4.2 contractWrite", () => {
  const write = (config: Body) => withNode(node("w", "contractWrite", { contractAddress: OTHER, ...config }));
  const transferCall = { methodName: "transfer", methodParams: [WALLET, "1"] };

  it("fills in value 0 (with callData or one call) and isSimulated false", () => {
    expect(accept(write({ callData: "0xa9059cbb" })).definition.nodes[0]!.config).toEqual({
      contractAddress: OTHER,
      callData: "0xa9059cbb",
      value: "0",
      isSimulated: false,
    });
    expect(accept(write({ contractAbi: ERC20_ABI, methodCalls: [transferCall] })).definition.nodes[0]!.config).toMatchObject({
      value: "0",
    });
    const two = accept(write({ contractAbi: ERC20_ABI, methodCalls: [transferCall, transferCall], isSimulated: true })).definition.nodes[0]!
      .config;
    expect(two).not.toHaveProperty("value");
    expect(two).toMatchObject({ isSimulated: true });
  });

  it("needs exactly one of callData and methodCalls", () => {
    invalid(write({}), "body.nodes[0].config", "must set callData or methodCalls");
    invalid(
      write({ callData: "0x", contractAbi: ERC20_ABI, methodCalls: [transferCall] }),
      "body.nodes[0].config.methodCalls",
      /must be absent when callData is given/,
    );
  });

  it("needs contractAbi when a call has no callData, and the method and parameter count to match it", () => {
    invalid(write({ methodCalls: [transferCall] }), "body.nodes[0].config.contractAbi", "is required when a method call has no callData");
    accept(write({ methodCalls: [{ methodName: "anything", callData: "0x1234" }] }));
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "approve", methodParams: [] }] }),
      "body.nodes[0].config.methodCalls[0].methodName",
      /names no function/,
    );
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "transfer", methodParams: ["1"] }] }),
      "body.nodes[0].config.methodCalls[0].methodParams",
      "must have 2 items, one per input of transfer",
    );
    accept(write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "mint", methodParams: ["5"] }] }));
    accept(write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "mint(address,uint256)", methodParams: [WALLET, "5"] }] }));
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "pay", methodParams: ["5"] }] }),
      "body.nodes[0].config.methodCalls[0].methodName",
      /overloaded.*pay\(uint256\)/,
    );
    accept(write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "pay(uint256)", methodParams: ["5"] }] }));
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "transfer", callData: "0x", methodParams: ["1"] }] }),
      "body.nodes[0].config.methodCalls[0].methodParams",
      "must be absent when callData is given",
    );
  });

  it("allows value only with callData or a single call, and checks formats", () => {
    accept(write({ callData: "0x", value: "{{start.data.wei}}" }));
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [transferCall, transferCall], value: "0" }),
      "body.nodes[0].config.value",
      "is allowed only with callData or a single method call",
    );
    invalid(write({ callData: "0x123" }), "body.nodes[0].config.callData");
    invalid(write({ callData: "0x", gasLimit: "1e6" }), "body.nodes[0].config.gasLimit");
    invalid(write({ callData: "0x", isSimulated: "yes" }), "body.nodes[0].config.isSimulated", "must be a boolean");
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: Array(21).fill(transferCall) }),
      "body.nodes[0].config.methodCalls",
      "must have at most 20 method calls",
    );
    invalid(write({ contractAbi: ERC20_ABI, methodCalls: [] }), "body.nodes[0].config.methodCalls", "must not be empty");
    invalid(write({ callData: "0x", contractAbi: "[]" }), "body.nodes[0].config.contractAbi");
    invalid(
      write({ contractAbi: ERC20_ABI, methodCalls: [{ ...transferCall, methodParams: ["{{ a + 1 }}", "1"] }] }),
      "body.nodes[0].config.methodCalls[0].methodParams[0]",
      PATHS_ONLY_MESSAGE,
    );
  });

  it("never checks templates inside contractAbi", () => {
    accept(
      write({ contractAbi: [...ERC20_ABI, { type: "function", name: "x", inputs: [], note: "{{ 1 + 1 }}" }], methodCalls: [transferCall] }),
    );
  });
});

describe("§8.4.3 contractRead", () => {
  const read = (config: Body) => withNode(node("r", "contractRead", { contractAddress: OTHER, ...config }));
  it("accepts up to 50 calls and requires contractAbi and methodCalls", () => {
    accept(
      read({ contractAbi: ERC20_ABI, methodCalls: Array(50).fill({ methodName: "balanceOf", methodParams: ["{{settings.runner}}"] }) }),
    );
    invalid(
      read({ contractAbi: ERC20_ABI, methodCalls: Array(51).fill({ methodName: "balanceOf", methodParams: [WALLET] }) }),
      "body.nodes[0].config.methodCalls",
    );
    invalid(read({ methodCalls: [{ methodName: "balanceOf", methodParams: [WALLET] }] }), "body.nodes[0].config.contractAbi");
    invalid(read({ contractAbi: ERC20_ABI }), "body.nodes[0].config.methodCalls");
    invalid(
      read({ contractAbi: ERC20_ABI, methodCalls: [{ methodName: "balanceOf" }] }),
      "body.nodes[0].config.methodCalls[0].methodParams",
    );
  });
});

describe("§8.4.4 graphqlQuery", () => {
  const gql = (config: Body) => withNode(node("q", "graphqlQuery", { url: "https://api.example/graphql", query: "{ a }", ...config }));
  it("accepts http(s) URLs, templated URLs and string variables", () => {
    accept(gql({ variables: { id: "{{start.data.id}}" } }));
    accept(gql({ url: "{{settings.endpoint}}/graphql" }));
  });
  it("refuses other URLs, a query over max_source_bytes, non-string variables, expressions", () => {
    invalid(gql({ url: "ftp://x" }), "body.nodes[0].config.url");
    invalid(gql({ url: "not a url" }), "body.nodes[0].config.url");
    invalid(gql({ variables: { id: 1 } }), "body.nodes[0].config.variables.id");
    invalid(gql({ variables: { id: "{{ a ? b : c }}" } }), "body.nodes[0].config.variables.id", PATHS_ONLY_MESSAGE);
    const limits: DefinitionLimits = { ...DEFAULT_LIMITS, maxSourceBytes: 10 };
    expect(refuse(gql({ query: "{ abcdefgh }" }), "create", { limits }).errors).toEqual([
      { path: "body.nodes[0].config.query", message: "must be at most 10 bytes" },
    ]);
  });
});

describe("§8.4.5 restApi", () => {
  const rest = (config: Body) => withNode(node("r", "restApi", { url: "https://api.example/x", method: "GET", ...config }));
  it("stores the method uppercase and accepts headers, a body and free-form options", () => {
    const { definition } = accept(
      rest({
        method: "post",
        headers: { Authorization: "Bearer {{secrets.TOKEN}}" },
        body: '{"a":{{start.data}}}',
        options: { timeout: 5, nested: { x: [1] } },
      }),
    );
    expect(definition.nodes[0]!.config).toMatchObject({ method: "POST" });
    accept(rest({ method: "OPTIONS" }));
  });
  it("refuses other methods, a body with GET or HEAD, more than 50 headers, expressions in option strings", () => {
    invalid(rest({ method: "TRACE" }), "body.nodes[0].config.method");
    invalid(rest({ body: "{}" }), "body.nodes[0].config.body", "is not allowed with GET");
    invalid(rest({ method: "head", body: "{}" }), "body.nodes[0].config.body", "is not allowed with HEAD");
    invalid(rest({ headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`h${i}`, "v"])) }), "body.nodes[0].config.headers");
    invalid(rest({ options: { deep: ["{{ x() }}"] } }), "body.nodes[0].config.options.deep[0]", PATHS_ONLY_MESSAGE);
  });
});

describe("§8.4.6 customCode", () => {
  it("fills in lang javascript and leaves non-path {{ … }} in the source alone", () => {
    const { definition } = accept(withNode(code("c", "const o = {{ a: 1 }}; return {{start.data}}")));
    expect(definition.nodes[0]!.config).toEqual({ lang: "javascript", source: "const o = {{ a: 1 }}; return {{start.data}}" });
  });
  it("refuses another lang, an empty source and one over max_source_bytes", () => {
    invalid(withNode(node("c", "customCode", { source: "1", lang: "python" })), "body.nodes[0].config.lang");
    invalid(withNode(code("c", "")), "body.nodes[0].config.source", "must not be empty");
    const limits: DefinitionLimits = { ...DEFAULT_LIMITS, maxSourceBytes: 8 };
    accept(withNode(code("c", "return 1")), "create", { limits });
    expect(refuse(withNode(code("c", "return 10")), "create", { limits }).errors).toEqual([
      { path: "body.nodes[0].config.source", message: "must be at most 8 bytes" },
    ]);
  });
});

describe("§8.4.7 branch", () => {
  const branch = (conditions: unknown[]) =>
    body({
      nodes: [node("b", "branch", { conditions }), code("x")],
      edges: [
        { id: "e0", source: "trig", target: "b" },
        { id: "e1", source: "b.c1", target: "x" },
      ],
      trigger: { id: "trig", ...manual() },
    });
  /** A branch of `conditions` is refused at `conditions[index].field` (with `message`). */
  const refused = (conditions: unknown[], index: number, field: string, message?: string | RegExp) =>
    invalid(branch(conditions), `body.nodes[0].config.conditions[${index}].${field}`, message);

  it("infers types: if first, else for a last empty expression, elseIf otherwise", () => {
    const { definition } = accept(
      branch([
        { id: "c1", expression: "a > 1" },
        { id: "c2", expression: "a > 0" },
        { id: "c3", expression: "  " },
      ]),
    );
    expect((definition.nodes[0]!.config as { conditions: unknown[] }).conditions).toEqual([
      { id: "c1", type: "if", expression: "a > 1" },
      { id: "c2", type: "elseIf", expression: "a > 0" },
      { id: "c3", type: "else", expression: "  " },
    ]);
    accept(branch([{ id: "c1", type: "if", expression: "true" }]));
  });

  it("refuses: a first condition that is not if, if after the first, else not last, else with an expression, an empty elseIf", () => {
    refused([{ id: "c1", type: "elseIf", expression: "1" }], 0, "type", "must be if for the first condition");
    refused(
      [
        { id: "c1", expression: "1" },
        { id: "c2", type: "if", expression: "2" },
      ],
      1,
      "type",
    );
    refused(
      [
        { id: "c1", expression: "1" },
        { id: "c2", type: "else", expression: "" },
        { id: "c3", expression: "3" },
      ],
      1,
      "type",
      "else must be the last condition",
    );
    refused(
      [
        { id: "c1", expression: "1" },
        { id: "c2", type: "else", expression: "x" },
      ],
      1,
      "expression",
      "must be empty for else",
    );
    refused(
      [
        { id: "c1", expression: "1" },
        { id: "c2", expression: "" },
        { id: "c3", expression: "" },
      ],
      1,
      "expression",
    );
    refused([{ id: "c1", expression: "" }], 0, "expression");
  });

  it("refuses duplicate condition ids, more than 20 conditions and expressions over 4 KiB", () => {
    refused(
      [
        { id: "c1", expression: "1" },
        { id: "c1", expression: "2" },
      ],
      1,
      "id",
      /unique within the branch/,
    );
    invalid(branch(Array.from({ length: 21 }, (_, i) => ({ id: `c${i + 1}`, expression: "1" }))), "body.nodes[0].config.conditions");
    refused([{ id: "c1", expression: "x".repeat(4097) }], 0, "expression", "must be at most 4096 bytes");
  });
});

describe("§8.4.8 filter and §8.4.9 loop", () => {
  const fetch = node("f", "restApi", { url: "https://x", method: "GET" }, "fetch");
  const withFetch = (n: Body) => body({ nodes: [fetch, n] });

  it("filter takes one whole template or a bare path, and a non-empty expression", () => {
    accept(withFetch(node("flt", "filter", { inputVariable: "{{ fetch.data.items }}", expression: "value > 1" })));
    accept(withFetch(node("flt", "filter", { inputVariable: "fetch.data.items", expression: "return value > 1" })));
    invalid(
      withFetch(node("flt", "filter", { inputVariable: "{{fetch.data.a}}{{fetch.data.b}}", expression: "1" })),
      "body.nodes[1].config.inputVariable",
    );
    invalid(
      withFetch(node("flt", "filter", { inputVariable: "fetch.data.items", expression: " " })),
      "body.nodes[1].config.expression",
      "must not be empty",
    );
  });

  it("loop fills in iterVar value and executionMode sequential, and validates its runner as a node config", () => {
    const loop = node("l", "loop", {
      inputVariable: "fetch.data.items",
      runner: { type: "contractWrite", config: { contractAddress: "{{value.token}}", callData: "0x" } },
    });
    const { definition } = accept(withFetch(loop));
    expect(definition.nodes[1]!.config).toEqual({
      inputVariable: "fetch.data.items",
      iterVar: "value",
      executionMode: "sequential",
      runner: { type: "contractWrite", config: { contractAddress: "{{value.token}}", callData: "0x", value: "0", isSimulated: false } },
    });
    accept(
      withFetch(
        node("l", "loop", {
          inputVariable: "{{fetch.data.items}}",
          iterVar: "item",
          executionMode: "parallel",
          runner: { type: "customCode", config: { source: "return item" }, id: "r", name: "r" },
        }),
      ),
    );
  });

  it("loop refuses an iterVar that is a node name or index, a runner kind that is not allowed, a bad runner config", () => {
    const runner = { type: "customCode", config: { source: "1" } };
    invalid(
      withFetch(node("l", "loop", { inputVariable: "fetch.data", iterVar: "fetch", runner })),
      "body.nodes[1].config.iterVar",
      "must not equal a trigger or node name",
    );
    invalid(withFetch(node("l", "loop", { inputVariable: "fetch.data", iterVar: "index", runner })), "body.nodes[1].config.iterVar");
    invalid(
      withFetch(node("l", "loop", { inputVariable: "fetch.data", runner: { type: "branch", config: {} } })),
      "body.nodes[1].config.runner.type",
    );
    invalid(
      withFetch(
        node("l", "loop", { inputVariable: "fetch.data", runner: { type: "ethTransfer", config: { destination: ZERO, amount: "1" } } }),
      ),
      "body.nodes[1].config.runner.config.destination",
    );
    invalid(
      withFetch(node("l", "loop", { inputVariable: "fetch.data", runner: { ...runner, name: "if" } })),
      "body.nodes[1].config.runner.name",
    );
    invalid(
      withFetch(node("l", "loop", { inputVariable: "fetch.data", runner: { type: "contractWrite", config: { contractAddress: OTHER } } })),
      "body.nodes[1].config.runner.config",
      "must set callData or methodCalls",
    );
    invalid(
      withFetch(node("l", "loop", { inputVariable: "fetch.data", runner, executionMode: "batch" })),
      "body.nodes[1].config.executionMode",
    );
  });
});

describe("§8.4.10 balance", () => {
  const balance = (config: Body) => withNode(node("bal", "balance", { address: WALLET, ...config }));
  it("accepts compatibility members, token addresses and a chain alias that agrees", () => {
    accept(
      balance({
        chain: "8453",
        chainId: 8453,
        tokenAddresses: [OTHER],
        includeSpam: false,
        includeZeroBalances: true,
        minUsdValueCents: 0,
      }),
    );
    accept(balance({ address: "{{settings.runner}}", chain: "1" }));
  });
  it("refuses a chain alias that disagrees, more than 50 tokens, a malformed chain", () => {
    invalid(balance({ chain: "1", chainId: 8453 }), "body.nodes[0].config.chain", "must agree with chainId");
    invalid(balance({ tokenAddresses: Array(51).fill(OTHER) }), "body.nodes[0].config.tokenAddresses");
    invalid(balance({ chain: "base" }), "body.nodes[0].config.chain");
  });
});

describe("§8.5 edges and graph rules", () => {
  const nodes = [code("a"), code("b"), code("c")];
  const graphBody = (edges: unknown[], extra: Body = {}) => body({ trigger: { id: "trig", ...manual() }, nodes, edges, ...extra });
  const graphError = (edges: unknown[], path: string, message?: string | RegExp, extra: Body = {}) =>
    refusedAt(graphBody(edges, extra), "WORKFLOW_GRAPH_INVALID", path, message);
  const chain = [
    { id: "e0", source: "trig", target: "a" },
    { id: "e1", source: "a", target: "b" },
    { id: "e2", source: "b", target: "c" },
  ];

  it("generates the chain _e0, _e1, … when edges are omitted or []", () => {
    const expected = [
      { id: "_e0", source: "trig", target: "a" },
      { id: "_e1", source: "a", target: "b" },
      { id: "_e2", source: "b", target: "c" },
    ];
    expect(accept(body({ trigger: { id: "trig", ...manual() }, nodes })).definition.edges).toEqual(expected);
    expect(accept(graphBody([])).definition.edges).toEqual(expected);
    expect(accept(graphBody(chain)).definition.edges).toEqual(chain);
  });

  it("refuses edges naming unknown ids, into the trigger, back to their source", () => {
    graphError([...chain, { id: "x", source: "nope", target: "c" }], "body.edges[3].source", "names no trigger or node: nope");
    graphError([...chain, { id: "x", source: "a", target: "nope" }], "body.edges[3].target", "names no node: nope");
    graphError([...chain, { id: "x", source: "a", target: "trig" }], "body.edges[3].target", "must be a node, not the trigger");
    graphError([...chain, { id: "x", source: "a", target: "a" }], "body.edges[3].target", "must not be the source node itself");
  });

  it("refuses edges with unknown members or malformed ids as field errors", () => {
    invalid(graphBody([{ ...chain[0]!, weight: 1 }, ...chain.slice(1)]), "body.edges[0].weight", "is not a known member");
    invalid(graphBody([{ ...chain[0]!, id: "e 0" }, ...chain.slice(1)]), "body.edges[0].id");
    invalid(graphBody([{ ...chain[0]!, target: "a.b" }, ...chain.slice(1)]), "body.edges[0].target", "must be a node id");
  });

  it("refuses a duplicate (source, target), and duplicate edge ids as a field error", () => {
    graphError([...chain, { id: "e9", source: "a", target: "b" }], "body.edges[3]", "duplicates edges[1]: same source and target");
    invalid(graphBody([...chain.slice(0, 2), { ...chain[2]!, id: "e0" }]), "body.edges[2].id", /unique among edge ids/);
  });

  it("refuses a cycle and names it", () => {
    const r = graphError([...chain, { id: "back", source: "c", target: "a" }], "body.edges[3]", "cycle: a -> b -> c -> a");
    expect(r.errors).toHaveLength(1);
  });

  it("refuses a node that the trigger does not reach", () => {
    graphError(chain.slice(0, 2), "body.nodes[2]", "is not reachable from the trigger");
    // A trigger without an id gets a generated one, so explicit edges cannot reach the nodes.
    const r = refuse(body({ nodes: [code("a")], edges: [{ id: "e", source: "start", target: "a" }] }));
    expect(r.code).toBe("WORKFLOW_GRAPH_INVALID");
  });

  it("requires templates rooted at a node name to name an ancestor", () => {
    const uses = (source: string) => [code("a"), code("b"), code("c", source)];
    accept(graphBody(chain, { nodes: uses("return {{a.data}} + {{ b.data.x }} + {{start.data}} + {{settings.runner}}") }));
    const parallel = [
      { id: "e0", source: "trig", target: "a" },
      { id: "e1", source: "trig", target: "b" },
      { id: "e2", source: "b", target: "c" },
    ];
    graphError(parallel, "body.nodes[2].config.source", "template a.data refers to node a, which is not an ancestor of node c", {
      nodes: uses("return {{a.data}}"),
    });
    graphError(chain, "body.nodes[0].config.source", /refers to node a, which is not an ancestor of node a/, {
      nodes: [code("a", "{{a.data}}"), code("b"), code("c")],
    });
    graphError(chain, "body.nodes[0].config.source", /refers to node c/, { nodes: [code("a", "{{c.data}}"), code("b"), code("c")] });
  });

  it("checks the ancestor rule in every templated value and in filter/loop inputVariable", () => {
    const late = [node("f", "filter", { inputVariable: "later.data", expression: "true" }), code("later")];
    refusedAt(body({ nodes: late }), "WORKFLOW_GRAPH_INVALID", "body.nodes[0].config.inputVariable");
    const header = [node("r", "restApi", { url: "https://x", method: "GET", headers: { "X-Id": "{{later.data.id}}" } }), code("later")];
    refusedAt(body({ nodes: header }), "WORKFLOW_GRAPH_INVALID", "body.nodes[0].config.headers.X-Id");
  });

  it("needs edges out of a branch to name a condition, and explicit edges with a branch", () => {
    const branch = node("br", "branch", {
      conditions: [
        { id: "yes", expression: "true" },
        { id: "no", expression: "" },
      ],
    });
    const ok = [
      { id: "e0", source: "trig", target: "br" },
      { id: "e1", source: "br.yes", target: "a" },
      { id: "e2", source: "br.no", target: "b" },
      { id: "e3", source: "br.yes", target: "c" },
    ];
    const nodesWithBranch = [branch, code("a"), code("b"), code("c")];
    accept(graphBody(ok, { nodes: nodesWithBranch }));
    graphError(
      [...ok.slice(0, 3), { id: "e3", source: "br", target: "c" }],
      "body.edges[3].source",
      /must name one of its conditions as br.<conditionId>/,
      { nodes: nodesWithBranch },
    );
    graphError(
      [...ok.slice(0, 3), { id: "e3", source: "br.maybe", target: "c" }],
      "body.edges[3].source",
      "names no condition of branch br: maybe",
      { nodes: nodesWithBranch },
    );
    graphError([...ok.slice(0, 3), { id: "e3", source: "a.yes", target: "c" }], "body.edges[3].source", /a is not a branch node/, {
      nodes: nodesWithBranch,
    });
    graphError([], "body.nodes[0]", /branches need explicit edges/, { nodes: nodesWithBranch });
    refusedAt(body({ nodes: nodesWithBranch }), "WORKFLOW_GRAPH_INVALID", "body.nodes[0]");
    invalid(graphBody([{ id: "e", source: "a.b.c", target: "a" }]), "body.edges[0].source");
  });

  it("compiles the graph: incoming edges, a topological order, ancestors", () => {
    const branch = node("br", "branch", {
      conditions: [
        { id: "yes", expression: "true" },
        { id: "no", expression: "" },
      ],
    });
    const { graph } = accept(
      body({
        trigger: { id: "trig", ...manual() },
        nodes: [code("join"), branch, code("left"), code("right")],
        edges: [
          { id: "e0", source: "trig", target: "br" },
          { id: "e1", source: "br.yes", target: "left" },
          { id: "e2", source: "br.no", target: "right" },
          { id: "e3", source: "left", target: "join" },
          { id: "e4", source: "right", target: "join" },
        ],
      }),
    );
    expect(graph.triggerId).toBe("trig");
    expect(graph.order).toEqual(["br", "left", "right", "join"]);
    expect(graph.incoming.get("join")).toEqual([
      { edgeId: "e3", source: "left" },
      { edgeId: "e4", source: "right" },
    ]);
    expect(graph.incoming.get("left")).toEqual([{ edgeId: "e1", source: "br", condition: "yes" }]);
    expect(graph.outgoing.get("br")).toEqual([
      { edgeId: "e1", target: "left", condition: "yes" },
      { edgeId: "e2", target: "right", condition: "no" },
    ]);
    expect([...graph.ancestors.get("join")!].sort()).toEqual(["br", "left", "right", "trig"]);
    expect([...graph.ancestors.get("br")!]).toEqual(["trig"]);
  });
});

describe("§8.6 names and templates", () => {
  it("refuses every reserved word as a trigger or node name", () => {
    for (const word of RESERVED_WORDS) {
      invalid(withNode(code("a", "1", word)), "body.nodes[0].name", "must be a JavaScript identifier that is not a reserved word");
    }
    accept(withNode(code("a", "1", "$fetch_2")));
  });

  it("accepts templated fields with ['text'], [\"text\"], .0 and [0] paths, refuses expressions with the contract's message", () => {
    const url = `https://x/{{start.data['a b']}}/{{ start.data["c"] }}/{{start.data.items.0}}/{{start.data.items[1]}}`;
    accept(withNode(node("r", "restApi", { url, method: "GET" })));
    const r = invalid(
      withNode(node("r", "restApi", { url: "https://x/{{ start.data.id + 1 }}", method: "GET" })),
      "body.nodes[0].config.url",
    );
    expect(r.errors).toEqual([
      { path: "body.nodes[0].config.url", message: "templates accept paths only; use a customCode node for expressions" },
    ]);
  });
});

describe("§8.7 validation order and items 2-4", () => {
  it("item 2: 1 to max_nodes nodes, unique ids and names across trigger and nodes, at most max_edges edges", () => {
    invalid(body({ nodes: [] }), "body.nodes", "must have at least 1 node");
    const limits: DefinitionLimits = { ...DEFAULT_LIMITS, maxNodes: 2, maxEdges: 2 };
    expect(refuse(body({ nodes: [code("a"), code("b"), code("c")] }), "create", { limits }).errors).toEqual([
      { path: "body.nodes", message: "must have at most 2 nodes" },
    ]);
    expect(
      refuse(body({ edges: [1, 2, 3].map((i) => ({ id: `e${i}`, source: "a", target: "a" })) }), "create", { limits }).errors,
    ).toContainEqual({
      path: "body.edges",
      message: "must have at most 2 edges",
    });
    invalid(
      body({ trigger: { id: "a", ...manual() } }),
      "body.nodes[0].id",
      /unique among the trigger and node ids \(body.trigger.id is also a\)/,
    );
    invalid(body({ nodes: [code("a"), code("b", "1", "a")] }), "body.nodes[1].name", /unique among the trigger and node names/);
    invalid(body({ nodes: [code("a", "1", "start")] }), "body.nodes[0].name");
  });

  it("item 3: inputVariables keys are identifiers, not names, not reserved roots; settings is an object", () => {
    accept(body({ inputVariables: { apiBase: "https://x", $n: 1, settings: { mode: "fast" } } }));
    invalid(body({ inputVariables: { "api-base": 1 } }), "body.inputVariables.api-base", "must be an identifier");
    invalid(body({ inputVariables: { a: 1 } }), "body.inputVariables.a", "must not equal a trigger or node name");
    invalid(body({ inputVariables: { start: 1 } }), "body.inputVariables.start");
    for (const key of ["secrets", "apContext", "context", "date", "value", "index"])
      invalid(body({ inputVariables: { [key]: 1 } }), `body.inputVariables.${key}`);
    invalid(body({ inputVariables: { settings: "x" } }), "body.inputVariables.settings", "must be an object");
    invalid(body({ inputVariables: [] }), "body.inputVariables", "must be an object");
  });

  it("item 3: the service writes settings.runner and settings.chainId, keeping other members; sent values must agree", () => {
    const { definition } = accept(
      body({
        chainId: 8453,
        inputVariables: { settings: { runner: WALLET.toUpperCase().replace("0X", "0x"), chainId: 8453, mode: "x" }, k: 1 },
      }),
    );
    expect(definition.inputVariables).toEqual({ settings: { runner: WALLET, chainId: 8453, mode: "x" }, k: 1 });
    expect(definition.chainId).toBe(8453);
    expect(accept(body()).definition.inputVariables).toEqual({ settings: { runner: WALLET, chainId: 31337 } });
    invalid(
      body({ inputVariables: { settings: { runner: OTHER } } }),
      "body.inputVariables.settings.runner",
      "must equal smartWalletAddress",
    );
    invalid(body({ inputVariables: { settings: { runner: "me" } } }), "body.inputVariables.settings.runner", "must be an address");
    invalid(
      body({ chainId: 1, inputVariables: { settings: { chainId: 8453 } } }),
      "body.inputVariables.settings.chainId",
      "must equal the workflow chain (1)",
    );
    invalid(body({ inputVariables: { settings: { chainId: "31337" } } }), "body.inputVariables.settings.chainId");
  });

  it("item 4: maxExecution at least 1 (default 51,840), expiredAt after now and after startAt, startAt past or future", () => {
    expect(accept(body()).definition.maxExecution).toBe(51_840);
    expect(accept(body({ maxExecution: 1, startAt: NOW - 86_400_000 })).definition).toMatchObject({
      maxExecution: 1,
      startAt: NOW - 86_400_000,
    });
    invalid(body({ maxExecution: 0 }), "body.maxExecution", "must be at least 1");
    invalid(body({ expiredAt: NOW }), "body.expiredAt", "must be after now");
    invalid(body({ startAt: NOW + 10_000, expiredAt: NOW + 5_000 }), "body.expiredAt", "must be after startAt");
    accept(body({ startAt: NOW + 10_000, expiredAt: NOW + 20_000, name: "My workflow" }));
  });

  it("refuses unknown body members, and estimateFees' expireAt spelling at create", () => {
    invalid(body({ expireAt: NOW + 1000 }), "body.expireAt", "is not a known member");
    invalid(body({ owner: WALLET }), "body.owner", "is not a known member");
    invalid(body({ name: "" }), "body.name");
    invalid(body({ smartWalletAddress: "0x12" }), "body.smartWalletAddress");
    invalid({ trigger: manual(), nodes: [code("a")] }, "body.smartWalletAddress");
  });

  it("items 1-4: every field error is reported together in one VALIDATION_FAILED", () => {
    const r = refuse({
      smartWalletAddress: "0xnope",
      chainId: 999,
      trigger: { name: "start", type: "cron", config: { schedules: ["* * * * *", "bad"] } },
      nodes: [
        node("a", "ethTransfer", { destination: ZERO, amount: "0" }),
        code("a", "1", "if"),
        node("c", "restApi", { url: "https://x/{{ 1 + 1 }}", method: "GET", body: "x" }),
      ],
      edges: [{ id: "e0", source: "start", target: "zzz" }],
      inputVariables: { a: 1, "b-c": 2 },
      maxExecution: 0,
      expiredAt: NOW - 1,
    });
    expect(r.code).toBe("VALIDATION_FAILED");
    expect(r.errors.map((e) => e.path).sort()).toEqual(
      [
        "body.smartWalletAddress",
        "body.trigger.config.schedules[1]",
        "body.nodes[0].config.destination",
        "body.nodes[0].config.amount",
        "body.nodes[1].id",
        "body.nodes[1].name",
        "body.nodes[2].config.url",
        "body.nodes[2].config.body",
        "body.inputVariables.a",
        "body.inputVariables.b-c",
        "body.maxExecution",
        "body.expiredAt",
      ].sort(),
    );
  });

  it("item 5: every non-zero chain id must be configured (workflow, trigger, node, loop runner, balance alias); 0 is absent", () => {
    const r = refuse(
      body({
        chainId: 5,
        trigger: { name: "start", type: "block", config: { interval: 100, chainId: 7 } },
        nodes: [
          node("t", "ethTransfer", { destination: OTHER, amount: "1", chainId: 9 }),
          node("l", "loop", {
            inputVariable: "start.data",
            runner: {
              type: "contractRead",
              config: {
                contractAddress: OTHER,
                contractAbi: ERC20_ABI,
                methodCalls: [{ methodName: "balanceOf", methodParams: [WALLET] }],
                chainId: 11,
              },
            },
          }),
          node("b", "balance", { address: WALLET, chain: "13" }),
        ],
      }),
    );
    expect(r.code).toBe("UNSUPPORTED_CHAIN");
    expect(r.errors).toEqual([
      { path: "body.chainId", message: "chain 5 is not supported by this service" },
      { path: "body.trigger.config.chainId", message: "chain 7 is not supported by this service" },
      { path: "body.nodes[0].config.chainId", message: "chain 9 is not supported by this service" },
      { path: "body.nodes[1].config.runner.config.chainId", message: "chain 11 is not supported by this service" },
      { path: "body.nodes[2].config.chain", message: "chain 13 is not supported by this service" },
    ]);
    expect(
      accept(body({ chainId: 0, nodes: [node("t", "ethTransfer", { destination: OTHER, amount: "1", chainId: 0 })] })).definition.chainId,
    ).toBe(31337);
  });

  it("answers with the first failing item: fields before chains before graph before frequency", () => {
    const cycle = [
      { id: "e0", source: "trig", target: "a" },
      { id: "e1", source: "a", target: "b" },
      { id: "e2", source: "b", target: "a" },
    ];
    const everything = {
      trigger: { id: "trig", name: "start", type: "cron", config: { schedules: ["* * * * *"] } },
      nodes: [code("a"), code("b")],
      edges: cycle,
      chainId: 5,
    };
    expect(refuse(body({ ...everything, maxExecution: 0 })).code).toBe("VALIDATION_FAILED");
    expect(refuse(body(everything)).code).toBe("UNSUPPORTED_CHAIN");
    expect(refuse(body({ ...everything, chainId: 1 })).code).toBe("WORKFLOW_GRAPH_INVALID");
    expect(refuse(body({ ...everything, chainId: 1, edges: cycle.slice(0, 2) })).code).toBe("TRIGGER_TOO_FREQUENT");
  });
});

describe("simulate and estimateFees bodies", () => {
  const definitionOnly = (extra: Body = {}) => ({ trigger: manual(), nodes: [code("a")], ...extra });
  const transfer = node("t", "ethTransfer", { destination: OTHER, amount: "1" });

  it("simulate requires inputVariables, and settings.runner when a node sends a user operation", () => {
    invalid(definitionOnly(), "body.inputVariables", undefined, "simulate");
    const sim = accept(definitionOnly({ inputVariables: {} }), "simulate").definition;
    expect(sim.inputVariables).toEqual({ settings: { chainId: 31337 } });
    expect(sim).not.toHaveProperty("runner");
    invalid(
      definitionOnly({ nodes: [transfer], inputVariables: {} }),
      "body.inputVariables.settings.runner",
      /is required when a node sends a user operation/,
      "simulate",
    );
    const loop = node("l", "loop", {
      inputVariable: "start.data",
      runner: { type: "ethTransfer", config: { destination: OTHER, amount: "1" } },
    });
    invalid(definitionOnly({ nodes: [loop], inputVariables: {} }), "body.inputVariables.settings.runner", undefined, "simulate");
    const withRunner = accept(
      definitionOnly({ nodes: [transfer], inputVariables: { settings: { runner: OTHER.toLowerCase() } } }),
      "simulate",
    ).definition;
    expect(withRunner).toMatchObject({ runner: OTHER, inputVariables: { settings: { runner: OTHER, chainId: 31337 } } });
  });

  it("simulate refuses create-only members and checks a manual triggerOutput", () => {
    invalid(
      definitionOnly({ inputVariables: {}, smartWalletAddress: WALLET }),
      "body.smartWalletAddress",
      "is not a known member",
      "simulate",
    );
    invalid(definitionOnly({ inputVariables: {}, maxExecution: 1 }), "body.maxExecution", "is not a known member", "simulate");
    const out = accept(
      definitionOnly({ inputVariables: {}, triggerOutput: { data: { x: 1 }, headers: { a: "b" } } }),
      "simulate",
    ).definition;
    expect(out.triggerOutput).toEqual({ data: { x: 1 }, headers: { a: "b" } });
    invalid(
      definitionOnly({ inputVariables: {}, triggerOutput: { data: 1, extra: 2 } }),
      "body.triggerOutput.extra",
      "is not a known member",
      "simulate",
    );
    const block = { name: "start", type: "block", config: { interval: 1 } };
    expect(
      accept(definitionOnly({ trigger: block, inputVariables: {}, triggerOutput: { blockNumber: 5 } }), "simulate").definition
        .triggerOutput,
    ).toEqual({ blockNumber: 5 });
  });

  it("estimateFees requires createdAt, expireAt after it and maxExecution; runner overrides settings.runner", () => {
    const fees = (extra: Body) => definitionOnly({ createdAt: NOW, expireAt: NOW + 1, maxExecution: 1, ...extra });
    const est = accept(fees({ runner: OTHER.toLowerCase(), inputVariables: { settings: { runner: WALLET } } }), "estimateFees").definition;
    expect(est).toMatchObject({
      runner: OTHER,
      createdAt: NOW,
      expireAt: NOW + 1,
      maxExecution: 1,
      inputVariables: { settings: { runner: OTHER } },
    });
    expect(accept(fees({ inputVariables: { settings: { runner: WALLET } } }), "estimateFees").definition.runner).toBe(WALLET);
    invalid(fees({ expireAt: NOW }), "body.expireAt", "must be after createdAt", "estimateFees");
    invalid(fees({ maxExecution: 0 }), "body.maxExecution", undefined, "estimateFees");
    const r = refuse(definitionOnly(), "estimateFees");
    expect(r.errors.map((e) => e.path).sort()).toEqual(["body.createdAt", "body.expireAt", "body.maxExecution"]);
    invalid(fees({ expiredAt: NOW + 5 }), "body.expiredAt", "is not a known member", "estimateFees");
  });
});
