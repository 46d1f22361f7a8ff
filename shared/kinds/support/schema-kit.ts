/**
 * The pieces the kinds' config schemas are built from (shared/workflow/schemas.ts, module header, says what
 * they follow): the definition limits, building blocks, scalars (§1.5), templated fields (§8.4, §8.6) and the
 * config parts several kinds share.
 */
import * as v from "valibot";
import { ChainIdNumber, Uint256String } from "../../http/validate";
import { AddressString } from "../../http/address-schemas";
import {
  PATHS_ONLY_MESSAGE,
  RESERVED_WORDS,
  WHOLE_TEMPLATE_OR_PATH_SOURCE,
  forEachString,
  hasTemplate,
  templateProblem,
} from "../../templates";

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
export function strict<const E extends v.ObjectEntries>(entries: E, description?: string) {
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
export const record = <const K extends v.GenericSchema<string, string>, const V extends v.GenericSchema>(
  key: K,
  value: V,
  message = "must be an object",
) => {
  const base = v.record(key, value, message);
  return refuseArrays({ ...base, "~run": (dataset, config) => runRecord(base, dataset, config) } as typeof base);
};

export type Dataset = { typed?: boolean; value: unknown; issues?: v.BaseIssue<unknown>[] };

type RecordBase = Pick<v.RecordSchema<v.GenericSchema<string, string>, v.GenericSchema, string>, "key" | "value" | "~run">;

function runRecord(base: RecordBase, dataset: Dataset, config: v.Config<v.BaseIssue<unknown>>): Dataset {
  const input = dataset.value;
  if (input === null || typeof input !== "object") return base["~run"](dataset as never, config) as Dataset;
  const output: Record<string, unknown> = {};
  const out: Dataset = { typed: true, value: output };
  const report = (issues: v.BaseIssue<unknown>[], origin: "key" | "value", entry: string, member: unknown) => {
    const item: v.ObjectPathItem = { type: "object", origin, input: input as Record<string, unknown>, key: entry, value: member };
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
function setMember(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** An optional member: absent or null; `fallback` is filled in when given. */
export function opt<const S extends v.GenericSchema>(schema: S): v.NullishSchema<S, undefined>;
export function opt<const S extends v.GenericSchema, const D extends v.InferOutput<S>>(schema: S, fallback: D): v.NullishSchema<S, D>;
export function opt(schema: v.GenericSchema, fallback?: unknown) {
  return fallback === undefined ? v.nullish(schema) : v.nullish(schema, fallback as never);
}

export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(
    v.number("must be an integer"),
    v.integer("must be an integer"),
    v.minValue(min, min === 0 ? "must not be negative" : `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max === Number.MAX_SAFE_INTEGER ? "2^53 - 1" : max}`),
  );

export const str = (message = "must be a string") => v.string(message);
export const bool = () => v.boolean("must be a boolean");
export const list = <const S extends v.GenericSchema>(item: S, min: number, max: number, what = "items") =>
  v.pipe(
    v.array(item, "must be an array"),
    v.minLength(min, min === 1 ? "must not be empty" : `must have at least ${min} ${what}`),
    v.maxLength(max, `must have at most ${max} ${what}`),
  );
export const stringMap = (value: v.GenericSchema<unknown, string>, max: number) =>
  v.pipe(record(str(), value, "must be an object of strings"), v.maxEntries(max, `must have at most ${max} entries`));
export const utf8Bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");

// ---------------------------------------------------------------------------------------------------------
// Scalars (§1.5)

export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const NAME_PATTERN = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
const NAME_MESSAGE = "must be a JavaScript identifier that is not a reserved word";
export const IDENTIFIER_PATTERN = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

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
const HexString = v.pipe(str(), v.regex(/^0x(?:[0-9a-fA-F]{2})*$/, "must be hex data (0x followed by an even number of hex digits)"));

const ZERO_ADDRESS = /^0x0{40}$/;
const NonZeroAddress = v.pipe(
  AddressString,
  v.check((a) => !ZERO_ADDRESS.test(a), "must not be the zero address"),
);
const PositiveUint256 = v.pipe(
  Uint256String,
  v.check((s) => s !== "0", "must be greater than 0"),
);
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
export const NonZeroAddressOrTemplate = v.pipe(
  templatedOr(
    NonZeroAddress,
    "0x[0-9a-fA-F]{40}",
    "must be an address or a {{ path }} template",
    `Address other than the zero address ${TEMPLATE_NOTE}.`,
  ),
  v.metadata({ not: { const: `0x${"0".repeat(40)}` } }), // documents the literal's rule: not the zero address
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
export const TemplatedAny = v.pipe(
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
// Shared config parts

/** The chain a trigger, node or loop runner acts on: its `config.chainId` (or balance `chain`) if non-zero, else the workflow chain. */
export function partChainId(config: unknown, workflowChainId: number): number {
  const c = typeof config === "object" && config !== null ? (config as Record<string, unknown>) : {};
  const chainId = typeof c.chainId === "number" ? c.chainId : 0;
  const alias = typeof c.chain === "string" && /^[0-9]+$/.test(c.chain) ? Number(c.chain) : 0;
  return chainId || alias || workflowChainId;
}

/** ABI items (free-form objects). Never templated. */
export const ContractAbi = v.pipe(
  v.array(record(str(), v.unknown(), "must be an ABI item (an object)"), "must be an array of ABI items"),
  v.description("ABI items (JSON objects); never templated."),
);

export const ABI_TYPE =
  /^(?:address|bool|string|bytes(?:[1-9]|[12][0-9]|3[0-2])?|u?int(?:8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)?)(?:\[[0-9]*\])*$/;

function methodCall(templated: boolean) {
  return strict(
    {
      methodName: v.pipe(
        str(),
        v.minLength(1, "must not be empty"),
        v.description("A function name in `contractAbi`, or a full signature such as `transfer(address,uint256)`."),
      ),
      methodParams: opt(v.array(templated ? TemplateText : str(), "must be an array of strings")),
      callData: opt(templated ? HexOrTemplate : HexString),
      contractAddress: opt(templated ? AddressOrTemplate : AddressString),
      applyToFields: opt(
        v.pipe(v.array(str(), "must be an array of strings"), v.description("Accepted for client compatibility; no effect.")),
      ),
    },
    "MethodCall. `methodParams` (one string per ABI input) and `callData` are mutually exclusive; without `callData` the method must exist in `contractAbi` and the parameter count must match.",
  );
}
export const MethodCall = methodCall(true);
export type MethodCall = v.InferOutput<typeof MethodCall>;
export const LiteralMethodCall = methodCall(false);
