/**
 * The shapes of a workflow definition (API.md §8.1, §8.3-§8.5, §8.8.1, §8.8.8, §8.8.9) as valibot schemas: one
 * definition of each shape for request validation, the stored document, the engine's types and the OpenAPI
 * document (they convert with @valibot/to-json-schema: regexes come before transforms, and what a schema
 * cannot say is in `description`).
 *
 * Scope: field shapes and formats (§8.7 item 1). Rules that relate several fields (ids unique, ABI lookups,
 * branch condition order...) are in definition.ts, which reports them together with these.
 *
 * Conventions of the contract applied here:
 * - Unknown members are rejected (strict objects) except in free-form objects: `inputVariables`, manual `data`,
 *   `triggerOutput`, ABI items, restApi `options` and the compatibility members of balance.
 * - An optional member sent as `null` is treated as absent (§1.3), and absent members with a default are
 *   filled in (the stored document carries the defaults, §8.1).
 * - Templated fields of node configs: a string containing `{{` is a template and must use paths only (§8.6);
 *   any other string is checked as the literal it stands for (Address, Uint256, Hex, URL). Addresses are
 *   returned in EIP-55 form, templates as sent. Trigger configs are never templated.
 */
import * as v from "valibot";
import { Cron } from "croner";
import { ChainIdNumber, Uint256String, UlidString } from "../http/validate";
import { AddressString } from "../http/address-schemas";
import {
  PATHS_ONLY_MESSAGE,
  RESERVED_WORDS,
  WHOLE_TEMPLATE_OR_PATH_SOURCE,
  forEachString,
  hasTemplate,
  templateProblem,
} from "../templates";

/** The settings of API.md §4.1 that shape a definition; pass `useConfig().limits` (or a subset). */
export interface DefinitionLimits {
  maxManualDataBytes: number;
  maxSourceBytes: number;
  maxNodes: number;
  maxEdges: number;
  defaultMaxExecution: number;
  minCronIntervalS: number;
  minBlockIntervalS: number;
}

export const DEFAULT_LIMITS: DefinitionLimits = {
  maxManualDataBytes: 1_048_576,
  maxSourceBytes: 102_400,
  maxNodes: 100,
  maxEdges: 500,
  defaultMaxExecution: 51_840,
  minCronIntervalS: 300,
  minBlockIntervalS: 60,
};

export const TRIGGER_TYPES = ["manual", "fixedTime", "cron", "block", "event"] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];
export const NODE_TYPES = [
  "ethTransfer", "contractWrite", "contractRead", "graphqlQuery", "restApi",
  "customCode", "branch", "filter", "loop", "balance",
] as const;
export type NodeType = (typeof NODE_TYPES)[number];
export const RUNNER_TYPES = ["ethTransfer", "contractWrite", "contractRead", "graphqlQuery", "restApi", "customCode"] as const;
/** Node kinds that send a user operation from the runner wallet. */
export const WRITE_NODE_TYPES: readonly string[] = ["ethTransfer", "contractWrite"];
/** Trigger and node kinds that act on a chain, and so have a `chainId` (§5). */
export const CHAIN_AWARE_TYPES: readonly string[] = ["block", "event", "ethTransfer", "contractWrite", "contractRead", "balance"];
/** Names that `inputVariables` keys may not take (§8.7 item 3); trigger and node names are checked too. */
export const RESERVED_INPUT_KEYS = ["secrets", "apContext", "context", "date", "value", "index"] as const;
export const WORKFLOW_STATUSES = ["enabled", "disabled", "completed", "failed"] as const;
export const COMPLETION_REASONS = ["MAX_EXECUTIONS_REACHED", "EXPIRED", "CONSECUTIVE_ERRORS"] as const;

// ---------------------------------------------------------------------------------------------------------
// Building blocks

type NoNull<T> = { [K in keyof T]: Exclude<T[K], null> };

/** Drops members whose value is null or undefined (an optional member sent as null is absent). */
function withoutNulls<T extends Record<string, unknown>>(o: T): NoNull<T> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(o)) if (value !== null && value !== undefined) out[key] = value;
  return out as NoNull<T>;
}

const objectMessage = (issue: v.StrictObjectIssue) => (issue.expected === "never" ? "is not a known member" : "must be an object");

/**
 * valibot's object and record schemas accept arrays (and then see a fresh object): `refuseArrays` answers an
 * array as the schema answers any other non-object ("must be an object"). It keeps the schema's own shape
 * (type, entries, pipe), so variants and the JSON Schema conversion see a plain object schema in every
 * `typeMode` (JSON Schema's `type: object` already excludes arrays).
 */
function refuseArrays<const S extends v.GenericSchema>(schema: S): S {
  return {
    ...schema,
    "~run"(dataset, config) {
      if (!Array.isArray(dataset.value)) return schema["~run"](dataset, config);
      const refused = schema["~run"]({ value: null }, config);
      for (const issue of refused.issues ?? []) Object.assign(issue, { input: dataset.value, received: "Array" });
      return refused;
    },
  };
}

/** A strict object (unknown members rejected, arrays refused) whose optional members may be sent as null. */
function strict<const E extends v.ObjectEntries>(entries: E, description?: string) {
  const base = v.strictObject(entries, objectMessage);
  return refuseArrays(
    description ? v.pipe(base, v.description(description), v.transform(withoutNulls)) : v.pipe(base, v.transform(withoutNulls)),
  );
}

/**
 * A JSON object with any keys of `key`'s format and values of `value`'s. Every own key is kept as data, exactly
 * as sent: the empty string, `__proto__`, `constructor` and `prototype` included (API.md §18.6). valibot's own
 * record drops the last three, and an assignment `out["__proto__"] = x` would set the prototype instead of
 * adding a member, so this one runs valibot's checks per entry and defines each member.
 */
export const record = <const K extends v.GenericSchema<string, string>, const V extends v.GenericSchema>(key: K, value: V, message = "must be an object") => {
  const base = v.record(key, value, message);
  return refuseArrays({ ...base, "~run": (dataset, config) => runRecord(base, dataset, config) } as typeof base);
};

type Dataset = { typed?: boolean; value: unknown; issues?: v.BaseIssue<unknown>[] };

type RecordBase = Pick<v.RecordSchema<v.GenericSchema<string, string>, v.GenericSchema, string>, "key" | "value" | "~run">;

function runRecord(base: RecordBase, dataset: Dataset, config: v.Config<v.BaseIssue<unknown>>): Dataset {
  const input = dataset.value;
  if (input === null || typeof input !== "object") return base["~run"](dataset as never, config) as Dataset;
  const output: Record<string, unknown> = {};
  const out: Dataset = { typed: true, value: output };
  const report = (issues: v.BaseIssue<unknown>[], origin: "key" | "value", entry: string, member: unknown) => {
    const item = { type: "object", origin, input, key: entry, value: member } as unknown as v.IssuePathItem;
    for (const issue of issues) {
      if (origin === "value" && issue.path) (issue.path as v.IssuePathItem[]).unshift(item);
      else (issue as { path?: v.IssuePathItem[] }).path = [item];
      (out.issues ??= []).push(issue);
    }
  };
  for (const entry of Object.keys(input)) {
    const member = (input as Record<string, unknown>)[entry];
    const k = base.key["~run"]({ value: entry }, config) as Dataset;
    if (k.issues) {
      report(k.issues, "key", entry, member);
      if (config.abortEarly) return { ...out, typed: false };
    }
    const m = base.value["~run"]({ value: member }, config) as Dataset;
    if (m.issues) {
      report(m.issues, "value", entry, member);
      if (config.abortEarly) return { ...out, typed: false };
    }
    if (!k.typed || !m.typed) out.typed = false;
    if (k.typed) setMember(output, k.value as string, m.value);
  }
  return out;
}

/** `target[key] = value` as data for every key, `__proto__` included. */
export function setMember(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** An optional member: absent or null; `fallback` is filled in when given. */
function opt<const S extends v.GenericSchema>(schema: S): v.NullishSchema<S, undefined>;
function opt<const S extends v.GenericSchema, const D extends v.InferOutput<S>>(schema: S, fallback: D): v.NullishSchema<S, D>;
function opt(schema: v.GenericSchema, fallback?: unknown) {
  return fallback === undefined ? v.nullish(schema) : v.nullish(schema, fallback as never);
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(
    v.number("must be an integer"),
    v.integer("must be an integer"),
    v.minValue(min, min === 0 ? "must not be negative" : `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max === Number.MAX_SAFE_INTEGER ? "2^53 - 1" : max}`),
  );

const str = (message = "must be a string") => v.string(message);
const bool = () => v.boolean("must be a boolean");
const list = <const S extends v.GenericSchema>(item: S, min: number, max: number, what = "items") =>
  v.pipe(
    v.array(item, "must be an array"),
    v.minLength(min, min === 1 ? "must not be empty" : `must have at least ${min} ${what}`),
    v.maxLength(max, `must have at most ${max} ${what}`),
  );
const stringMap = (value: v.GenericSchema<unknown, string>, max: number) =>
  v.pipe(record(str(), value, "must be an object of strings"), v.maxEntries(max, `must have at most ${max} entries`));
const utf8Bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");

// ---------------------------------------------------------------------------------------------------------
// Scalars (§1.5)

export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const NAME_PATTERN = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
export const NAME_MESSAGE = "must be a JavaScript identifier that is not a reserved word";
const IDENTIFIER_PATTERN = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export const IdString = v.pipe(str(), v.regex(ID_PATTERN, "must be 1-64 characters from A-Z, a-z, 0-9, _ and -"));
export const NameString = v.pipe(
  str(),
  v.regex(NAME_PATTERN, NAME_MESSAGE),
  v.notValues(RESERVED_WORDS, NAME_MESSAGE),
  v.description("Name: a JavaScript identifier of at most 64 characters that is not a reserved word (API.md §8.6)."),
);
export const TimeMs = v.pipe(int(0), v.description("TimeMs: Unix time in milliseconds."));
export const ChainId = v.pipe(ChainIdNumber, v.description("ChainId: a positive EVM chain id; 0 means absent."));
export const Bytes32 = v.pipe(str(), v.regex(/^0x[0-9a-fA-F]{64}$/, "must be 32 bytes of hex (0x followed by 64 hex digits)"));
export const HexString = v.pipe(str(), v.regex(/^0x(?:[0-9a-fA-F]{2})*$/, "must be hex data (0x followed by an even number of hex digits)"));
export { AddressString, Uint256String, UlidString };

const ZERO_ADDRESS = /^0x0{40}$/;
const NonZeroAddress = v.pipe(AddressString, v.check((a) => !ZERO_ADDRESS.test(a), "must not be the zero address"));
const PositiveUint256 = v.pipe(Uint256String, v.check((s) => s !== "0", "must be greater than 0"));
const HttpUrl = v.pipe(
  str(),
  v.check((s) => {
    try {
      const url = new URL(s);
      return url.protocol === "http:" || url.protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an http or https URL"),
);

// ---------------------------------------------------------------------------------------------------------
// Templated fields (§8.4, §8.6)

const ANY_TEMPLATE = "[\\s\\S]*\\{\\{[\\s\\S]*";

/**
 * A node-config string that is either a template (contains `{{`; paths only) or a literal of `literal`'s
 * format. `pattern` is the literal's regex source, joined with the template alternative so that JSON Schema
 * gets the same choice.
 */
function templatedOr(literal: v.GenericSchema<string, string>, pattern: string, message: string, description: string) {
  return v.pipe(
    str(message),
    v.regex(new RegExp(`^(?:${pattern}|${ANY_TEMPLATE})$`), message),
    v.description(description),
    v.metadata({ "x-templated": true }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const text = dataset.value;
      if (hasTemplate(text)) {
        const problem = templateProblem(text);
        if (problem) {
          addIssue({ message: problem });
          return NEVER;
        }
        return text;
      }
      const parsed = v.safeParse(literal, text);
      if (!parsed.success) {
        for (const issue of parsed.issues) addIssue({ message: issue.message });
        return NEVER;
      }
      return parsed.output;
    }),
  );
}

const TEMPLATE_NOTE = "or a `{{ path }}` template (paths only), checked after expansion at run time";
export const AddressOrTemplate = templatedOr(
  AddressString,
  "0x[0-9a-fA-F]{40}",
  "must be an address or a {{ path }} template",
  `Address (returned in EIP-55 form) ${TEMPLATE_NOTE}.`,
);
export const NonZeroAddressOrTemplate = templatedOr(
  NonZeroAddress,
  "0x[0-9a-fA-F]{40}",
  "must be an address or a {{ path }} template",
  `Address other than the zero address ${TEMPLATE_NOTE}.`,
);
export const Uint256OrTemplate = templatedOr(
  Uint256String,
  "0|[1-9][0-9]*",
  "must be a canonical decimal integer or a {{ path }} template",
  `Uint256 (canonical decimal, at most 2^256 - 1) ${TEMPLATE_NOTE}.`,
);
export const AmountOrTemplate = templatedOr(
  v.union([v.literal("max"), PositiveUint256]),
  "[1-9][0-9]*|max",
  'must be a wei amount greater than 0 as a canonical decimal, "max", or a {{ path }} template',
  `Wei amount greater than 0 (Uint256), or "max", ${TEMPLATE_NOTE}.`,
);
export const HexOrTemplate = templatedOr(
  str(),
  "0x(?:[0-9a-fA-F]{2})*",
  "must be hex data (0x followed by an even number of hex digits) or a {{ path }} template",
  `Hex ${TEMPLATE_NOTE}.`,
);
export const UrlOrTemplate = templatedOr(
  HttpUrl,
  "[hH][tT][tT][pP][sS]?://[\\s\\S]+",
  "must be an http or https URL or contain a {{ path }} template",
  `An http or https URL; may contain \`{{ path }}\` templates (paths only).`,
);

/** Any string; `{{ … }}` in it must be a path. */
export const TemplateText = v.pipe(
  str(),
  v.check((s) => templateProblem(s) === null, PATHS_ONLY_MESSAGE),
  v.description("String; may contain `{{ path }}` templates (paths only, API.md §8.6)."),
  v.metadata({ "x-templated": true }),
);

/** A free-form value of a node config: any JSON, but `{{ … }}` in its strings must be paths. */
const TemplatedAny = v.pipe(
  v.unknown(),
  v.rawCheck(({ dataset, addIssue }) => {
    forEachString(dataset.value, (text, at) => {
      if (templateProblem(text) === null) return;
      const path = at.map((key) => ({ type: "unknown", origin: "value", input: dataset.value, key, value: text }));
      addIssue({ message: PATHS_ONLY_MESSAGE, ...(path.length ? { path: path as never } : {}) });
    });
  }),
);

/** filter/loop `inputVariable`: one whole template or a bare path; its value is used, not its text. */
export const WholeTemplate = v.pipe(
  str(),
  v.regex(new RegExp(WHOLE_TEMPLATE_OR_PATH_SOURCE), "must be one {{ path }} template or a bare path such as fetch.data.items"),
  v.description("One whole `{{ path }}` template, or the bare path; must resolve to an array at run time."),
);

// ---------------------------------------------------------------------------------------------------------
// Cron (§8.3.3)

const CRON_VALUE = "(?:[0-9]+|[A-Za-z]{3})";
const CRON_ITEM = `(?:\\*|${CRON_VALUE}(?:-${CRON_VALUE})?)(?:/[0-9]+)?`;
const CRON_FIELD = `${CRON_ITEM}(?:,${CRON_ITEM})*`;
export const CRON_DESCRIPTORS = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"] as const;
const CRON_PATTERN = new RegExp(`^(?:${CRON_DESCRIPTORS.join("|")}|${CRON_FIELD}(?:[ \\t]+${CRON_FIELD}){4})$`);
const CRON_MESSAGE =
  "must be a cron expression: five fields (minute hour day-of-month month day-of-week) with *, lists, ranges, steps and JAN-DEC/SUN-SAT names, or @yearly, @annually, @monthly, @weekly, @daily, @hourly";

/**
 * Options for croner that give the contract's reading of an expression: five fields only, day-of-month OR
 * day-of-week when both are restricted (croner's `domAndDow: false`, the former `legacyMode: true`), 0 and 7
 * both Sunday (croner's standard weekday numbering).
 */
export const CRONER_OPTIONS = { mode: "5-part", domAndDow: false, alternativeWeekdays: false, paused: true } as const;

export function isCronExpression(expression: string): boolean {
  if (!CRON_PATTERN.test(expression)) return false;
  try {
    // An expression that can never fire (`0 0 30 2 *`) is refused too: 28 years from 2000 cover every calendar.
    return new Cron(expression, CRONER_OPTIONS).nextRun(new Date(Date.UTC(2000, 0, 1))) !== null;
  } catch {
    return false;
  }
}

export const CronExpression = v.pipe(
  str(),
  v.regex(CRON_PATTERN, CRON_MESSAGE),
  v.check(isCronExpression, CRON_MESSAGE),
  v.description(
    "Five-field cron expression (minute hour day-of-month month day-of-week; `*`, `,`, `-`, `/`, JAN-DEC, SUN-SAT case-insensitive, day of week 0-7 with 0 and 7 Sunday; day-of-month and day-of-week both restricted means either may match), or @yearly, @annually, @monthly, @weekly, @daily, @hourly.",
  ),
);

export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
export const TimeZone = v.pipe(
  str(),
  v.regex(/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/, "must be an IANA time zone name such as Europe/Paris"),
  v.check(isTimeZone, "must be an IANA time zone name such as Europe/Paris"),
);

// ---------------------------------------------------------------------------------------------------------
// Shared config parts

/** ABI items (free-form objects). Never templated. */
export const ContractAbi = v.pipe(
  v.array(record(str(), v.unknown(), "must be an ABI item (an object)"), "must be an array of ABI items"),
  v.description("ABI items (JSON objects); never templated."),
);

const ABI_TYPE =
  /^(?:address|bool|string|bytes(?:[1-9]|[12][0-9]|3[0-2])?|u?int(?:8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)?)(?:\[[0-9]*\])*$/;

function methodCall(templated: boolean) {
  return strict(
    {
      methodName: v.pipe(str(), v.minLength(1, "must not be empty"), v.description("A function name in `contractAbi`, or a full signature such as `transfer(address,uint256)`.")),
      methodParams: opt(v.array(templated ? TemplateText : str(), "must be an array of strings")),
      callData: opt(templated ? HexOrTemplate : HexString),
      contractAddress: opt(templated ? AddressOrTemplate : AddressString),
      applyToFields: opt(v.pipe(v.array(str(), "must be an array of strings"), v.description("Accepted for client compatibility; no effect."))),
    },
    "MethodCall. `methodParams` (one string per ABI input) and `callData` are mutually exclusive; without `callData` the method must exist in `contractAbi` and the parameter count must match.",
  );
}
export const MethodCall = methodCall(true);
export const LiteralMethodCall = methodCall(false);

// ---------------------------------------------------------------------------------------------------------
// The schemas that depend on the limits

/** Every schema of a definition for the given limits (cached per distinct limits). */
export function workflowSchemas(limits: DefinitionLimits = DEFAULT_LIMITS) {
  const key = `${limits.maxManualDataBytes}/${limits.maxSourceBytes}/${limits.maxNodes}/${limits.maxEdges}/${limits.defaultMaxExecution}`;
  let schemas = cache.get(key);
  if (!schemas) {
    schemas = build(limits);
    cache.set(key, schemas);
  }
  return schemas;
}
const cache = new Map<string, ReturnType<typeof build>>();

function build(limits: DefinitionLimits) {
  const manualData = v.pipe(
    v.unknown(),
    v.check((data) => utf8Bytes(data) <= limits.maxManualDataBytes, `must be at most ${limits.maxManualDataBytes} bytes serialized`),
    v.description(`Any JSON, at most ${limits.maxManualDataBytes} bytes serialized.`),
  );

  // Trigger configs (§8.3) -------------------------------------------------------------------------------
  const ManualConfig = strict(
    {
      data: opt(manualData),
      headers: opt(stringMap(str("must be a string"), 50)),
      pathParams: opt(stringMap(str("must be a string"), 50)),
      lang: opt(v.picklist(["json", "javascript"], "must be json or javascript"), "json"),
    },
    "manual trigger. With `lang` javascript, `data` must be a string (source text, never evaluated).",
  );
  const FixedTimeConfig = strict(
    { epochs: list(TimeMs, 1, 1000) },
    "fixedTime trigger. At create at least one epoch must be after now and inside [startAt, expiredAt) when those are set.",
  );
  const CronConfig = strict(
    {
      schedules: list(CronExpression, 1, 10, "schedules"),
      timezone: opt(TimeZone, "UTC"),
    },
    "cron trigger. Any two consecutive fires of the union of `schedules` in `timezone`, over a whole cycle of the expressions (daylight-saving changes included), must be at least `min_cron_interval_s` (300 s) apart (TRIGGER_TOO_FREQUENT).",
  );
  const BlockConfig = strict(
    { interval: int(1), chainId: opt(ChainId) },
    "block trigger. `interval` × the chain's block time must be at least `min_block_interval_s` (60 s) (TRIGGER_TOO_FREQUENT).",
  );
  const EventCondition = strict({
    fieldName: v.pipe(str(), v.minLength(1, "must not be empty"), v.description("A decoded event argument by ABI name, optionally prefixed with the event name (`Transfer.value`); must exist in `contractAbi`.")),
    operator: v.picklist(["eq", "ne", "gt", "gte", "lt", "lte", "contains"], "must be one of eq, ne, gt, gte, lt, lte, contains"),
    value: str(),
    fieldType: opt(v.pipe(str(), v.regex(ABI_TYPE, "must be an ABI type such as uint256, int256, address, bool, bytes32 or string"))),
  });
  const EventQuery = strict(
    {
      addresses: opt(list(AddressString, 0, 100, "addresses")),
      topics: opt(
        v.pipe(
          v.array(v.union([Bytes32, v.literal(""), v.null()], 'must be 32 bytes of hex, null or ""'), "must be an array"),
          v.maxLength(4, "must have at most 4 topics"),
        ),
      ),
      maxEventsPerBlock: opt(int(1, 10_000), 100),
      contractAbi: opt(ContractAbi),
      conditions: opt(list(EventCondition, 0, 20, "conditions")),
      methodCalls: opt(list(LiteralMethodCall, 0, 10, "method calls")),
    },
    "EventQuery. At least one address or a non-null `topics[0]`; `contractAbi` is required with `conditions`.",
  );
  const EventConfig = strict({
    queries: list(EventQuery, 1, 10, "queries"),
    cooldownSeconds: opt(int(0, 86_400), 0),
    chainId: opt(ChainId),
  });

  const triggerOption = <const T extends TriggerType, const C extends v.GenericSchema>(type: T, config: C) =>
    strict({ id: opt(IdString), name: NameString, type: v.literal(type), config });
  const Trigger = v.variant(
    "type",
    [
      triggerOption("manual", ManualConfig),
      triggerOption("fixedTime", FixedTimeConfig),
      triggerOption("cron", CronConfig),
      triggerOption("block", BlockConfig),
      triggerOption("event", EventConfig),
    ],
    `must be one of ${TRIGGER_TYPES.join(", ")}`,
  );

  // Node configs (§8.4) ----------------------------------------------------------------------------------
  const source = v.pipe(
    str(),
    v.minBytes(1, "must not be empty"),
    v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`),
  );
  const expression = v.pipe(str(), v.maxBytes(4096, "must be at most 4096 bytes"));

  const EthTransferConfig = strict({
    destination: NonZeroAddressOrTemplate,
    amount: AmountOrTemplate,
    chainId: opt(ChainId),
  });
  const ContractWriteConfig = strict(
    {
      contractAddress: AddressOrTemplate,
      callData: opt(HexOrTemplate),
      methodCalls: opt(list(MethodCall, 1, 20, "method calls")),
      contractAbi: opt(ContractAbi),
      value: opt(Uint256OrTemplate),
      gasLimit: opt(Uint256String),
      isSimulated: opt(bool(), false),
      chainId: opt(ChainId),
    },
    'contractWrite. Exactly one of `callData` and `methodCalls`; `contractAbi` required when a method call has no `callData`; `value` (default "0") only with `callData` or a single method call.',
  );
  const ContractReadConfig = strict({
    contractAddress: AddressOrTemplate,
    contractAbi: ContractAbi,
    methodCalls: list(MethodCall, 1, 50, "method calls"),
    chainId: opt(ChainId),
  });
  const GraphqlQueryConfig = strict({
    url: UrlOrTemplate,
    query: v.pipe(TemplateText, v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`)),
    variables: opt(record(str(), TemplateText, "must be an object of strings")),
  });
  const methodPattern = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    .map((m) => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join(""))
    .join("|");
  const RestApiConfig = strict(
    {
      url: UrlOrTemplate,
      method: v.pipe(
        str(),
        v.regex(new RegExp(`^(?:${methodPattern})$`), "must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"),
        v.description("GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS, case-insensitive, stored uppercase."),
        v.transform((m) => m.toUpperCase() as "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"),
      ),
      headers: opt(stringMap(TemplateText, 50)),
      body: opt(TemplateText),
      options: opt(v.pipe(record(str(), TemplatedAny), v.description("Accepted for client compatibility; no effect."))),
    },
    "restApi. `body` is not allowed with GET or HEAD.",
  );
  const CustomCodeConfig = strict({
    lang: opt(v.literal("javascript", "must be javascript"), "javascript"),
    source: v.pipe(source, v.description(`JavaScript function body, 1 to ${limits.maxSourceBytes} bytes.`)),
  });
  const BranchCondition = strict(
    {
      id: IdString,
      type: opt(v.picklist(["if", "elseIf", "else"], "must be if, elseIf or else")),
      expression,
    },
    "BranchCondition. `type` is inferred when absent: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. The first is `if`, `if` only first, `else` at most once and last with an empty expression; only `else` may have an empty expression. Ids unique within the branch.",
  );
  const BranchConfig = strict({ conditions: list(BranchCondition, 1, 20, "conditions") });
  const FilterConfig = strict({
    inputVariable: WholeTemplate,
    expression: v.pipe(expression, v.check((s) => s.trim() !== "", "must not be empty")),
  });
  const BalanceConfig = strict(
    {
      address: AddressOrTemplate,
      chainId: opt(ChainId),
      chain: opt(v.pipe(str(), v.regex(/^(?:0|[1-9][0-9]{0,15})$/, "must be a chain id as a decimal string"), v.description("Compatibility alias of `chainId`; must agree with it when both are set."))),
      tokenAddresses: opt(list(AddressString, 0, 50, "addresses")),
      includeSpam: opt(TemplatedAny),
      includeZeroBalances: opt(TemplatedAny),
      minUsdValueCents: opt(TemplatedAny),
    },
    "balance. `includeSpam`, `includeZeroBalances` and `minUsdValueCents` are accepted for client compatibility and have no effect.",
  );

  const runnerOption = <const T extends (typeof RUNNER_TYPES)[number], const C extends v.GenericSchema>(type: T, config: C) =>
    strict({ type: v.literal(type), config, id: opt(IdString), name: opt(NameString) });
  const LoopRunner = v.variant(
    "type",
    [
      runnerOption("ethTransfer", EthTransferConfig),
      runnerOption("contractWrite", ContractWriteConfig),
      runnerOption("contractRead", ContractReadConfig),
      runnerOption("graphqlQuery", GraphqlQueryConfig),
      runnerOption("restApi", RestApiConfig),
      runnerOption("customCode", CustomCodeConfig),
    ],
    `must be one of ${RUNNER_TYPES.join(", ")}`,
  );
  const LoopConfig = strict({
    inputVariable: WholeTemplate,
    iterVar: opt(
      v.pipe(
        str(),
        v.regex(NAME_PATTERN, "must be a JavaScript identifier that is not a reserved word (value is allowed)"),
        v.notValues(
          RESERVED_WORDS.filter((w) => w !== "value"),
          "must be a JavaScript identifier that is not a reserved word (value is allowed)",
        ),
        v.description("Default `value`. Must not equal a trigger or node name or `index`."),
      ),
      "value",
    ),
    executionMode: opt(v.picklist(["sequential", "parallel"], "must be sequential or parallel"), "sequential"),
    runner: LoopRunner,
  });

  const nodeOption = <const T extends NodeType, const C extends v.GenericSchema>(type: T, config: C) =>
    strict({ id: IdString, name: NameString, type: v.literal(type), config });
  const Node = v.variant(
    "type",
    [
      nodeOption("ethTransfer", EthTransferConfig),
      nodeOption("contractWrite", ContractWriteConfig),
      nodeOption("contractRead", ContractReadConfig),
      nodeOption("graphqlQuery", GraphqlQueryConfig),
      nodeOption("restApi", RestApiConfig),
      nodeOption("customCode", CustomCodeConfig),
      nodeOption("branch", BranchConfig),
      nodeOption("filter", FilterConfig),
      nodeOption("loop", LoopConfig),
      nodeOption("balance", BalanceConfig),
    ],
    `must be one of ${NODE_TYPES.join(", ")}`,
  );

  // Edges (§8.5) -----------------------------------------------------------------------------------------
  const Edge = strict(
    {
      id: IdString,
      source: v.pipe(
        str(),
        v.regex(/^[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64})?$/, "must be a trigger or node id, or <branchNodeId>.<conditionId>"),
      ),
      target: v.pipe(str(), v.regex(ID_PATTERN, "must be a node id")),
    },
    "Edge. Ids unique among edges; `source` names the trigger, a node that is not a branch, or `<branchNodeId>.<conditionId>`; `target` names a node other than the source node.",
  );

  // Bodies (§8.8.1, §8.8.8, §8.8.9) ------------------------------------------------------------------------
  const InputVariables = v.pipe(
    record(
      v.pipe(
        str(),
        v.regex(IDENTIFIER_PATTERN, "must be an identifier"),
        v.notValues(RESERVED_INPUT_KEYS, `must not be one of ${RESERVED_INPUT_KEYS.join(", ")}`),
      ),
      v.unknown(),
    ),
    v.description(
      "Free-form. Keys are identifiers, not trigger or node names and not secrets, apContext, context, date, value or index; `settings`, if present, is an object. The service writes `settings.runner` and `settings.chainId`.",
    ),
  );
  const nodes = v.pipe(
    v.array(Node, "must be an array"),
    v.minLength(1, "must have at least 1 node"),
    v.maxLength(limits.maxNodes, `must have at most ${limits.maxNodes} nodes`),
  );
  const edges = v.pipe(v.array(Edge, "must be an array"), v.maxLength(limits.maxEdges, `must have at most ${limits.maxEdges} edges`));
  const MaxExecution = int(1);
  const definitionEntries = {
    chainId: opt(ChainId),
    trigger: Trigger,
    nodes,
    edges: opt(v.pipe(edges, v.description("Optional: omitted or [] means trigger → nodes[0] → nodes[1] → … (edge ids _e0, _e1, …); not allowed with branch nodes."))),
  };

  const CreateBody = strict({
    name: opt(v.pipe(str(), v.minLength(1, "must be 1-255 characters"), v.maxLength(255, "must be 1-255 characters"))),
    smartWalletAddress: AddressString,
    ...definitionEntries,
    inputVariables: opt(InputVariables),
    startAt: opt(TimeMs),
    expiredAt: opt(v.pipe(TimeMs, v.description("After now and after `startAt`."))),
    maxExecution: opt(v.pipe(MaxExecution, v.description(`At least 1; default ${limits.defaultMaxExecution}.`)), limits.defaultMaxExecution),
  });
  const TriggerOutput = v.pipe(
    record(str(), v.unknown()),
    v.description("For manual only `data`, `headers` and `pathParams` (each defaulting to the trigger config's value); other types: the trigger step's `output.data`."),
  );
  const SimulateBody = strict({
    ...definitionEntries,
    inputVariables: v.pipe(InputVariables, v.description("Required (may be {}). `settings.runner` is required when a node sends a user operation.")),
    triggerOutput: opt(TriggerOutput),
  });
  const EstimateFeesBody = strict({
    ...definitionEntries,
    runner: opt(v.pipe(AddressString, v.description("Overrides `inputVariables.settings.runner`; any address."))),
    createdAt: TimeMs,
    expireAt: v.pipe(TimeMs, v.description("After `createdAt`.")),
    maxExecution: MaxExecution,
    inputVariables: opt(InputVariables),
  });
  const ManualTriggerOutput = strict({
    data: opt(manualData),
    headers: opt(stringMap(str("must be a string"), 50)),
    pathParams: opt(stringMap(str("must be a string"), 50)),
  });

  // The Workflow object (§8.1), as returned -----------------------------------------------------------------
  const Workflow = v.object({
    id: UlidString,
    name: v.optional(str()),
    owner: AddressString,
    smartWalletAddress: AddressString,
    chainId: ChainId,
    trigger: Trigger,
    nodes: v.array(Node),
    edges: v.array(Edge),
    inputVariables: record(str(), v.unknown()),
    status: v.picklist(WORKFLOW_STATUSES),
    startAt: v.optional(TimeMs),
    expiredAt: v.optional(TimeMs),
    maxExecution: int(1),
    executionCount: int(0),
    remainingExecutions: int(0),
    completionReason: v.optional(v.picklist(COMPLETION_REASONS)),
    lastRanAt: v.optional(TimeMs),
    createdAt: TimeMs,
    completedAt: v.optional(TimeMs),
  });

  return {
    ManualConfig, FixedTimeConfig, CronConfig, BlockConfig, EventConfig, EventQuery, EventCondition, Trigger,
    EthTransferConfig, ContractWriteConfig, ContractReadConfig, GraphqlQueryConfig, RestApiConfig, CustomCodeConfig,
    BranchCondition, BranchConfig, FilterConfig, LoopRunner, LoopConfig, BalanceConfig, Node,
    Edge, InputVariables, CreateBody, SimulateBody, EstimateFeesBody, TriggerOutput, ManualTriggerOutput, Workflow,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Types (outputs: defaults filled in, addresses EIP-55, null members dropped)

export type WorkflowSchemas = ReturnType<typeof build>;
type Out<K extends keyof WorkflowSchemas> = v.InferOutput<WorkflowSchemas[K]>;
export type Trigger = Out<"Trigger">;
export type Node = Out<"Node">;
export type Edge = Out<"Edge">;
export type LoopRunner = Out<"LoopRunner">;
export type BranchCondition = Out<"BranchCondition">;
export type EventQuery = Out<"EventQuery">;
export type MethodCall = v.InferOutput<typeof MethodCall>;
export type CreateBody = Out<"CreateBody">;
export type SimulateBody = Out<"SimulateBody">;
export type EstimateFeesBody = Out<"EstimateFeesBody">;
export type Workflow = Out<"Workflow">;
export type TriggerOf<T extends TriggerType> = Extract<Trigger, { type: T }>;
export type NodeOf<T extends NodeType> = Extract<Node, { type: T }>;
