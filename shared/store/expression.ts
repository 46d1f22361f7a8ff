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

/** A condition, rendered against one request's placeholders. */
export interface Condition {
  render(p: Placeholders): string;
}

/** An operand: a value, or another attribute of the item (`when.attr("x")`). */
type Operand = unknown;
class AttributeRef {
  constructor(readonly path: Path) {}
}
const operand = (p: Placeholders, value: Operand) => (value instanceof AttributeRef ? p.path(value.path) : p.value(value));
const condition = (render: (p: Placeholders) => string): Condition => ({ render });
const compare = (op: string) => (path: Path, value: Operand) => condition((p) => `${p.path(path)} ${op} ${operand(p, value)}`);

export const when = {
  exists: (path: Path = "pk") => condition((p) => `attribute_exists(${p.path(path)})`),
  notExists: (path: Path = "pk") => condition((p) => `attribute_not_exists(${p.path(path)})`),
  eq: compare("="),
  ne: compare("<>"),
  lt: compare("<"),
  le: compare("<="),
  gt: compare(">"),
  ge: compare(">="),
  beginsWith: (path: Path, prefix: string) => condition((p) => `begins_with(${p.path(path)}, ${p.value(prefix)})`),
  between: (path: Path, low: unknown, high: unknown) => condition((p) => `${p.path(path)} BETWEEN ${p.value(low)} AND ${p.value(high)}`),
  in: (path: Path, values: readonly unknown[]) => condition((p) => `${p.path(path)} IN (${values.map((v) => p.value(v)).join(", ")})`),
  /** The other attribute as an operand: `when.lt("used", when.attr("limit"))`. */
  attr: (path: Path) => new AttributeRef(path),
  and: (...conditions: (Condition | undefined | false)[]) => join("AND", conditions),
  or: (...conditions: (Condition | undefined | false)[]) => join("OR", conditions),
  not: (c: Condition) => condition((p) => `NOT (${c.render(p)})`),
};

function join(op: string, conditions: (Condition | undefined | false)[]): Condition {
  const parts = conditions.filter((c): c is Condition => Boolean(c));
  if (parts.length === 1) return parts[0]!;
  return condition((p) => parts.map((c) => `(${c.render(p)})`).join(` ${op} `));
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
