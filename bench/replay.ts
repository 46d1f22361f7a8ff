/**
 * Replaying recorded DynamoDB commands as a baseline: the same requests issued directly, without the service's code
 * around them (bench/run.ts's routes against their own requests, bench/load.ts's ceiling).
 */

/** A conditional write as the same write without its condition (and the names and values only it used). */
export function sameWriteEveryTime(command: object): object {
  const input = { ...(command as { input: Record<string, unknown> }).input };
  if (typeof input.ConditionExpression !== "string") return command;
  delete input.ConditionExpression;
  delete input.ReturnValuesOnConditionCheckFailure;
  const expressions = ["UpdateExpression", "KeyConditionExpression", "FilterExpression", "ProjectionExpression"]
    .map((k) => input[k] ?? "")
    .join(" ");
  const used = (placeholder: string) => new RegExp(`${placeholder}(?![A-Za-z0-9_])`).test(expressions);
  for (const key of ["ExpressionAttributeValues", "ExpressionAttributeNames"]) {
    const entries = Object.entries((input[key] ?? {}) as Record<string, unknown>).filter(([placeholder]) => used(placeholder));
    if (entries.length > 0) input[key] = Object.fromEntries(entries);
    else delete input[key];
  }
  const Command = command.constructor as new (input: Record<string, unknown>) => object;
  return new Command(input);
}

/**
 * The command with every string that contains `from` rewritten to contain `to` instead, in its keys, items and
 * values (attribute names are left alone): the same requests on another execution's items.
 */
export function withIdReplaced(command: object, from: string, to: string): object {
  const map = (value: unknown, key?: string): unknown => {
    if (typeof value === "string") return value.split(from).join(to);
    if (key === "ExpressionAttributeNames" || value === null || typeof value !== "object") return value;
    if (value instanceof Uint8Array || value instanceof Set) return value;
    if (Array.isArray(value)) return value.map((v) => map(v));
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, map(v, k)]));
  };
  const Command = command.constructor as new (input: unknown) => object;
  return new Command(map((command as { input: unknown }).input));
}
