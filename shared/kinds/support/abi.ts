/**
 * The one copy of the ABI work of the kinds (API.md §8.4.2-§8.4.3, §8.3.5): finding a MethodCall's function
 * (validation, runners and fees alike), the validation of method calls and event conditions against
 * `contractAbi`, parsing `methodParams` strings by ABI type after expansion, and turning decoded values into JSON
 * (integers as decimal strings, addresses EIP-55, bools, bytes as Hex, strings; arrays as arrays, tuples as
 * objects keyed by component name). Standard contracts' ABIs come from viem (`erc20Abi`).
 */
import { getAddress, isAddress, type AbiFunction, type AbiParameter } from "viem";
import { StepFailure, type Add } from "../kind";

interface RawParam {
  name?: string;
  type: string;
  components?: RawParam[];
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

function canonicalType(param: RawParam): string {
  if (param.type.startsWith("tuple")) return `(${(param.components ?? []).map(canonicalType).join(",")})${param.type.slice(5)}`;
  return param.type;
}

const signatureOf = (fn: AbiFunction) => `${fn.name}(${fn.inputs.map((p) => canonicalType(p as RawParam)).join(",")})`;

/** The function a MethodCall names: a name (with `paramCount` inputs when overloaded) or a full signature. */
export function findFunction(abi: readonly unknown[] | undefined, methodName: string, paramCount?: number): AbiFunction | undefined {
  const functions = (abi ?? [])
    .filter((item): item is AbiFunction => isObject(item) && (item.type ?? "function") === "function" && typeof item.name === "string")
    .map((fn) => ({ ...fn, type: "function" as const, inputs: fn.inputs ?? [], outputs: fn.outputs ?? [] }));
  if (methodName.includes("(")) {
    const signature = methodName.replace(/\s+/g, "");
    return functions.find((fn) => signatureOf(fn) === signature);
  }
  const named = functions.filter((fn) => fn.name === methodName);
  if (paramCount === undefined || named.length <= 1) return named[0];
  return named.find((fn) => fn.inputs.length === paramCount);
}

const bad = (field: string, what: string) => new StepFailure("INVALID_INPUT", `${field} ${what}`);

/** `methodParams` (strings) as the function's arguments; INVALID_INPUT naming the parameter otherwise. */
export function parseParams(fn: AbiFunction, params: readonly string[], field: string): unknown[] {
  if (params.length !== fn.inputs.length) throw bad(field, `must have ${fn.inputs.length} items, one per input of ${signatureOf(fn)}`);
  return fn.inputs.map((input, i) => parseArgument(input as RawParam, params[i]!, `${field}[${i}]`, true));
}

function parseArgument(param: RawParam, value: unknown, field: string, fromText: boolean): unknown {
  const type = param.type;
  const array = /^(.*)\[([0-9]*)\]$/.exec(type);
  if (array) {
    let items = value;
    if (fromText) items = parseJson(value as string, field);
    if (!Array.isArray(items)) throw bad(field, `must be a JSON array for ${type}`);
    if (array[2] !== "" && items.length !== Number(array[2])) throw bad(field, `must have ${array[2]} items for ${type}`);
    const element = { ...param, type: array[1]! };
    return items.map((item, i) => parseArgument(element, item, `${field}[${i}]`, false));
  }
  if (type === "tuple") {
    let members = value;
    if (fromText) members = parseJson(value as string, field);
    const components = param.components ?? [];
    if (Array.isArray(members)) {
      if (members.length !== components.length) throw bad(field, `must have ${components.length} members`);
      return members.map((m, i) => parseArgument(components[i]!, m, `${field}[${i}]`, false));
    }
    if (!isObject(members)) throw bad(field, "must be a JSON array or object for a tuple");
    const record = members;
    return Object.fromEntries(
      components.map((c, i) => {
        const key = c.name || String(i);
        if (!(key in record)) throw bad(field, `is missing member ${key}`);
        return [key, parseArgument(c, record[key], `${field}.${key}`, false)];
      }),
    );
  }
  const scalar = typeof value === "number" || typeof value === "boolean" ? String(value) : value;
  if (typeof scalar !== "string") throw bad(field, `must be a string for ${type}`);
  if (/^u?int[0-9]*$/.test(type)) {
    const text = scalar.trim();
    if (!/^-?(?:0|[1-9][0-9]*)$/.test(text) && !/^0x[0-9a-fA-F]+$/.test(text))
      throw bad(field, `must be an integer (decimal or 0x hex) for ${type}`);
    const n = BigInt(text);
    const bits = Number(type.replace(/^u?int/, "") || 256);
    const signed = type.startsWith("int");
    const min = signed ? -(2n ** BigInt(bits - 1)) : 0n;
    const max = signed ? 2n ** BigInt(bits - 1) - 1n : 2n ** BigInt(bits) - 1n;
    if (n < min || n > max) throw bad(field, `is out of range for ${type}`);
    return n;
  }
  if (type === "address") {
    if (!isAddress(scalar, { strict: false })) throw bad(field, "must be an address");
    return getAddress(scalar);
  }
  if (type === "bool") {
    if (scalar !== "true" && scalar !== "false") throw bad(field, "must be true or false");
    return scalar === "true";
  }
  if (type === "string") return scalar;
  const bytes = /^bytes([0-9]*)$/.exec(type);
  if (bytes) {
    if (!/^0x(?:[0-9a-fA-F]{2})*$/.test(scalar)) throw bad(field, `must be hex data for ${type}`);
    if (bytes[1] && (scalar.length - 2) / 2 !== Number(bytes[1])) throw bad(field, `must be ${bytes[1]} bytes for ${type}`);
    return scalar;
  }
  throw bad(field, `has an unsupported ABI type ${type}`);
}

function parseJson(text: string, field: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw bad(field, "must be JSON text");
  }
}

/** A decoded result as JSON: one output itself, several as an object keyed by name (`output0`... unnamed). */
export function outputValue(fn: AbiFunction, decoded: unknown): unknown {
  const outputs = fn.outputs as readonly RawParam[];
  if (outputs.length === 0) return null;
  if (outputs.length === 1) return toJson(outputs[0]!, decoded);
  const values = decoded as readonly unknown[];
  return Object.fromEntries(outputs.map((o, i) => [o.name || `output${i}`, toJson(o, values[i])]));
}

/** One decoded value as JSON by its ABI parameter. */
export function toJson(param: RawParam | AbiParameter, value: unknown): unknown {
  const p = param as RawParam;
  const array = /^(.*)\[([0-9]*)\]$/.exec(p.type);
  if (array) return (value as readonly unknown[]).map((item) => toJson({ ...p, type: array[1]! }, item));
  if (p.type === "tuple") {
    const components = p.components ?? [];
    const list = Array.isArray(value) ? value : components.map((c) => (value as Record<string, unknown>)[c.name ?? ""]);
    return Object.fromEntries(components.map((c, i) => [c.name || `output${i}`, toJson(c, list[i])]));
  }
  // viem gives integers of up to 48 bits as numbers; the contract says decimal strings for every width.
  if (typeof value === "bigint" || (typeof value === "number" && /^u?int/.test(p.type))) return value.toString();
  if (p.type === "address" && typeof value === "string") return getAddress(value);
  return value;
}

// ---------------------------------------------------------------------------------------------------------
// Validation against `contractAbi` (§8.7 items 1-4), on raw configs

const arrayOf = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
const present = (x: unknown) => x !== undefined && x !== null;

function abiEntries(abi: unknown[], kind: "function" | "event") {
  return abi.flatMap((item) => {
    if (!isObject(item) || typeof item.name !== "string") return [];
    const type = item.type ?? "function";
    if (type !== kind) return [];
    const inputs = arrayOf(item.inputs).filter((p): p is RawParam & Record<string, unknown> => isObject(p) && typeof p.type === "string");
    return [{ name: item.name, inputs, signature: `${item.name}(${inputs.map(canonicalType).join(",")})` }];
  });
}

/** MethodCalls against `abi`: callData excludes methodParams; a named method exists with a matching input count. */
export function methodCallProblems(calls: unknown[], abi: unknown[] | undefined, at: string, add: Add) {
  calls.forEach((call, m) => {
    if (!isObject(call)) return;
    const here = `${at}[${m}]`;
    if (present(call.callData)) {
      if (present(call.methodParams)) add(`${here}.methodParams`, "must be absent when callData is given");
      return;
    }
    const name = typeof call.methodName === "string" ? call.methodName : undefined;
    if (!abi || name === undefined || name === "") return;
    const params = arrayOf(call.methodParams).length;
    const functions = abiEntries(abi, "function");
    if (name.includes("(")) {
      const signature = name.replace(/\s+/g, "");
      const fn = functions.find((f) => f.signature === signature);
      if (!fn) add(`${here}.methodName`, `names no function of contractAbi: ${name}`);
      else if (fn.inputs.length !== params)
        add(`${here}.methodParams`, `must have ${fn.inputs.length} items, one per input of ${fn.signature}`);
      return;
    }
    const candidates = functions.filter((f) => f.name === name);
    if (candidates.length === 0) {
      add(`${here}.methodName`, `names no function of contractAbi: ${name}`);
      return;
    }
    const matching = candidates.filter((f) => f.inputs.length === params);
    if (matching.length === 0) {
      const counts = [...new Set(candidates.map((f) => f.inputs.length))].join(" or ");
      add(`${here}.methodParams`, `must have ${counts} items, one per input of ${name}`);
    } else if (matching.length > 1) {
      add(`${here}.methodName`, `is overloaded in contractAbi; use the full signature, e.g. ${matching[0]!.signature}`);
    }
  });
}

/** The event argument a condition names: `value`, `Transfer.value`, or `argN` for an unnamed input. */
export function eventArgument(abi: unknown[], fieldName: string): RawParam | undefined {
  const dot = fieldName.indexOf(".");
  const eventName = dot < 0 ? undefined : fieldName.slice(0, dot);
  const argName = dot < 0 ? fieldName : fieldName.slice(dot + 1);
  for (const event of abiEntries(abi, "event")) {
    if (eventName !== undefined && event.name !== eventName) continue;
    const found = event.inputs.find((p, i) => (typeof p.name === "string" && p.name !== "" ? p.name === argName : `arg${i}` === argName));
    if (found) return found;
  }
  return undefined;
}
