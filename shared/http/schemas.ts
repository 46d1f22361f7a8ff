/**
 * The scalar formats of API.md §1.5 as named components, and the request headers several routes share.
 * Request schemas validate with them; response schemas use them to document what the service answers.
 */
import * as v from "valibot";
import { Uint256String, UlidString } from "./validate";
import { component, configured, parameter } from "./endpoint";

/** A string format as a named component: `base` with its description and one example. */
const format = <S extends v.GenericSchema<string, string>>(name: string, base: S, description: string, example: string) =>
  component(name, v.pipe(base, v.description(description), v.examples([example])));

export const Uint256 = format(
  "Uint256",
  Uint256String,
  "Uint256: canonical decimal (no sign, no leading zeros, no hex), value at most 2^256 − 1.",
  "1000000000000000000",
);

export const Ulid = format(
  "Ulid",
  UlidString,
  "ULID: 26 characters of Crockford base32, generated uppercase (lowercase input is accepted and upper-cased).",
  "01JD7Q0S7W3C2Y8K5N6M4P1R9T",
);

export const Bytes32 = component("Bytes32", v.pipe(v.string(), v.regex(/^0x[0-9a-fA-F]{64}$/), v.description("`0x` + 64 hex digits.")));

export const TimeMs = component(
  "TimeMs",
  v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(Number.MAX_SAFE_INTEGER), v.description("Unix time in milliseconds.")),
);

/** A chain id the service answers with (requests take ChainIdNumber / ChainIdQuery, where 0 means absent). */
export const ChainId = component(
  "ChainId",
  v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(Number.MAX_SAFE_INTEGER), v.description("A positive EVM chain id.")),
);

const IDEMPOTENCY_KEY_MESSAGE = "must be 1-255 printable ASCII characters without spaces";

/** `Idempotency-Key` (API.md §1.4): 1-255 characters in 0x21-0x7E. */
const IdempotencyKey = parameter(
  "IdempotencyKey",
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[\x21-\x7e]{1,255}$/, IDEMPOTENCY_KEY_MESSAGE),
      configured(({ limits }) => ({
        minLength: 1,
        maxLength: 255,
        description: `Optional. 1–255 characters in the range 0x21–0x7E, else 400 \`VALIDATION_FAILED\` (\`header.Idempotency-Key\`). Scoped to the caller, the resource and the key for ${limits.idempotencyTtlS} s. A repeat with the same body answers with the recorded outcome and \`Idempotency-Replayed: true\`; with a different body → 422 \`IDEMPOTENCY_KEY_MISMATCH\`; while the first is still in progress → 409 \`IDEMPOTENCY_IN_PROGRESS\`. A request that failed before doing anything is not remembered under the key.`,
      })),
    ),
  ),
);

/** The headers of a route that honours `Idempotency-Key`. */
export const IdempotencyHeaders = v.object({ "Idempotency-Key": IdempotencyKey });

/**
 * A list query parameter (API.md §1.3): repeated keys and/or comma-separated values of `item`; empty items are
 * ignored, duplicates merged (before and after `item` reads them), at most 50 values. `description` says so.
 */
export const listOf = <const S extends v.GenericSchema<string, unknown>>(item: S, description: string) =>
  v.pipe(
    v.array(v.string()),
    v.transform((values) => [
      ...new Set(
        values
          .flatMap((x) => x.split(","))
          .map((x) => x.trim())
          .filter(Boolean),
      ),
    ]),
    v.maxLength(50, "accepts at most 50 values"),
    v.array(item),
    v.transform((values) => [...new Set(values)] as v.InferOutput<S>[]),
    v.description(description),
  );
