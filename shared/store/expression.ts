/**
 * Conditions and updates as typed values instead of expression strings. An entity (./entity.ts) turns them into
 * DynamoDB's `ConditionExpression` / `UpdateExpression` with generated placeholders, so no caller writes an
 * expression, escapes an attribute name or numbers a value itself.
 *
 *   when.and(when.exists("pk"), when.lt("count", max))          → "attribute_exists(#n0) AND #n1 < :v0"
 *   [set("status", "done"), remove("gsi2pk"), add("count", 1)]  → "SET #n0 = :v0, #n1 = ... REMOVE #n2"
 *
 * A path is an attribute name or a list of names and list indexes (`["costs", nodeId]` is `costs.<nodeId>`);
 * names are always placeholders, so any character is allowed in them.
 */
export type Path = string | readonly (string | number)[];

/** Names and values collected while one request's expressions are built. */
export class Placeholders {
  readonly names: Record<string, string> = {};
  readonly values: Record<string, unknown> = {};
  private readonly byName = new Map<string, string>();
  private valueCount = 0;

  path(path: Path): string {
    const parts = typeof path === "string" ? [path] : path;
    return parts
      .map((part) => (typeof part === "number" ? `[${part}]` : this.name(part)))
      .join(".")
      .replace(/\.\[/g, "[");
  }

  value(value: unknown): string {
    const placeholder = `:v${this.valueCount++}`;
    this.values[placeholder] = value;
    return placeholder;
  }

  private name(name: string): string {
    let placeholder = this.byName.get(name);
    if (!placeholder) {
      placeholder = `#n${this.byName.size}`;
      this.byName.set(name, placeholder);
      this.names[placeholder] = name;
    }
    return placeholder;
  }

  /** The request fields, without empty maps (DynamoDB refuses an empty ExpressionAttributeValues). */
  fields(): { ExpressionAttributeNames?: Record<string, string>; ExpressionAttributeValues?: Record<string, unknown> } {
    return {
      ...(Object.keys(this.names).length ? { ExpressionAttributeNames: this.names } : {}),
      ...(Object.keys(this.values).length ? { ExpressionAttributeValues: this.values } : {}),
    };
  }
}

/**
 * A condition: rendered against one request's placeholders for DynamoDB, or tested on an item in memory with
 * DynamoDB's semantics (a missing attribute or operands of different types compare false), for the reads of a
 * keys-only index, whose filters apply once the items are read by key (./query.ts).
 */
export interface Condition {
  render(p: Placeholders): string;
  test(item: Record<string, unknown>): boolean;
  /** The top-level attribute names the condition reads (what an item read to test it must hold). */
  readonly names: readonly string[];
}

/** An operand: a value, or another attribute of the item (`when.attr("x")`). */
type Operand = unknown;
class AttributeRef {
  constructor(readonly path: Path) {}
}
const operand = (p: Placeholders, value: Operand) => (value instanceof AttributeRef ? p.path(value.path) : p.value(value));

const topName = (path: Path) => String(typeof path === "string" ? path : path[0]);
/** The value at `path` in an item; undefined when any part is missing. */
function valueAt(item: unknown, path: Path): unknown {
  let at = item;
  for (const part of typeof path === "string" ? [path] : path) {
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string | number, unknown>)[part];
  }
  return at;
}
const resolve = (item: Record<string, unknown>, value: Operand) => (value instanceof AttributeRef ? valueAt(item, value.path) : value);
const namesOf = (path: Path, ...values: Operand[]) => [
  topName(path),
  ...values.filter((v): v is AttributeRef => v instanceof AttributeRef).map((v) => topName(v.path)),
];

/** DynamoDB orders numbers by value and strings by code unit; anything else, or two types, is not comparable. */
function order(a: unknown, b: unknown): number | undefined {
  const kind = (v: unknown) => (typeof v === "bigint" ? "number" : typeof v);
  if (kind(a) !== kind(b) || (kind(a) !== "number" && kind(a) !== "string")) return undefined;
  return a === b ? 0 : (a as number) < (b as number) ? -1 : 1;
}
function same(a: unknown, b: unknown): boolean {
  if (a instanceof Set && b instanceof Set) return a.size === b.size && [...a].every((x) => b.has(x));
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") return JSON.stringify(a) === JSON.stringify(b);
  return a === b || order(a, b) === 0;
}

const condition = (names: readonly string[], render: Condition["render"], test: Condition["test"]): Condition => ({ names, render, test });
const compare = (op: string, holds: (o: number) => boolean) => (path: Path, value: Operand) =>
  condition(
    namesOf(path, value),
    (p) => `${p.path(path)} ${op} ${operand(p, value)}`,
    (item) => {
      const o = order(valueAt(item, path), resolve(item, value));
      return o !== undefined && holds(o);
    },
  );

export const when = {
  exists: (path: Path = "pk") =>
    condition(
      [topName(path)],
      (p) => `attribute_exists(${p.path(path)})`,
      (item) => valueAt(item, path) !== undefined,
    ),
  notExists: (path: Path = "pk") =>
    condition(
      [topName(path)],
      (p) => `attribute_not_exists(${p.path(path)})`,
      (item) => valueAt(item, path) === undefined,
    ),
  eq: (path: Path, value: Operand) =>
    condition(
      namesOf(path, value),
      (p) => `${p.path(path)} = ${operand(p, value)}`,
      (item) => {
        const a = valueAt(item, path);
        return a !== undefined && same(a, resolve(item, value));
      },
    ),
  ne: (path: Path, value: Operand) =>
    condition(
      namesOf(path, value),
      (p) => `${p.path(path)} <> ${operand(p, value)}`,
      (item) => !same(valueAt(item, path), resolve(item, value)),
    ),
  lt: compare("<", (o) => o < 0),
  le: compare("<=", (o) => o <= 0),
  gt: compare(">", (o) => o > 0),
  ge: compare(">=", (o) => o >= 0),
  beginsWith: (path: Path, prefix: string) =>
    condition(
      [topName(path)],
      (p) => `begins_with(${p.path(path)}, ${p.value(prefix)})`,
      (item) => {
        const a = valueAt(item, path);
        return typeof a === "string" && a.startsWith(prefix);
      },
    ),
  between: (path: Path, low: unknown, high: unknown) =>
    condition(
      [topName(path)],
      (p) => `${p.path(path)} BETWEEN ${p.value(low)} AND ${p.value(high)}`,
      (item) => {
        const a = valueAt(item, path);
        const above = order(a, low);
        const below = order(a, high);
        return above !== undefined && below !== undefined && above >= 0 && below <= 0;
      },
    ),
  in: (path: Path, values: readonly unknown[]) =>
    condition(
      [topName(path)],
      (p) => `${p.path(path)} IN (${values.map((v) => p.value(v)).join(", ")})`,
      (item) => {
        const a = valueAt(item, path);
        return a !== undefined && values.some((v) => same(a, v));
      },
    ),
  /** The other attribute as an operand: `when.lt("used", when.attr("limit"))`. */
  attr: (path: Path) => new AttributeRef(path),
  and: (...conditions: (Condition | undefined | false)[]) => join("AND", conditions),
  or: (...conditions: (Condition | undefined | false)[]) => join("OR", conditions),
  not: (c: Condition) =>
    condition(
      c.names,
      (p) => `NOT (${c.render(p)})`,
      (item) => !c.test(item),
    ),
};

function join(op: "AND" | "OR", conditions: (Condition | undefined | false)[]): Condition {
  const parts = conditions.filter((c): c is Condition => Boolean(c));
  if (parts.length === 1) return parts[0]!;
  return condition(
    [...new Set(parts.flatMap((c) => c.names))],
    (p) => parts.map((c) => `(${c.render(p)})`).join(` ${op} `),
    op === "AND" ? (item) => parts.every((c) => c.test(item)) : (item) => parts.some((c) => c.test(item)),
  );
}

/** One clause of an update. */
export interface UpdateAction {
  clause: "SET" | "REMOVE" | "ADD" | "DELETE";
  render(p: Placeholders): string;
}

const action = (clause: UpdateAction["clause"], render: (p: Placeholders) => string): UpdateAction => ({ clause, render });

/** `path = value`. */
export const set = (path: Path, value: unknown) => action("SET", (p) => `${p.path(path)} = ${p.value(value)}`);
/** `path = path + by`, counting from `start` when the attribute is missing (SET, so it works in maps too). */
export const add = (path: Path, by: number | bigint, start: number | bigint = 0) =>
  action("SET", (p) => `${p.path(path)} = if_not_exists(${p.path(path)}, ${p.value(start)}) + ${p.value(by)}`);
/** DynamoDB's ADD: a number added (from 0 when the attribute is missing), or members added to a set. */
export const addTo = (path: Path, value: unknown) => action("ADD", (p) => `${p.path(path)} ${p.value(value)}`);
/** `path = from`: another attribute's value (read before the update, like every operand). */
export const copy = (path: Path, from: Path) => action("SET", (p) => `${p.path(path)} = ${p.path(from)}`);
export const remove = (path: Path) => action("REMOVE", (p) => p.path(path));
/** Sets every defined member of `values` (a shorthand for several `set`s). */
export const setAll = (values: Record<string, unknown>) =>
  Object.entries(values)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => set(k, v));

export function renderUpdate(p: Placeholders, actions: readonly UpdateAction[]): string {
  const clauses = new Map<string, string[]>();
  for (const a of actions) clauses.set(a.clause, [...(clauses.get(a.clause) ?? []), a.render(p)]);
  return [...clauses].map(([clause, parts]) => `${clause} ${parts.join(", ")}`).join(" ");
}
