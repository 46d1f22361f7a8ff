import * as v from "valibot";
import { AddressString } from "../http/address-schemas";
import {
  type DefinitionLimits,
  TRIGGER_TYPES,
  type TriggerType,
  IdString,
  NameString,
  TimeMs,
  ChainId,
  Bytes32,
  CronExpression,
  TimeZone,
  ContractAbi,
  LiteralMethodCall,
  strict,
  opt,
  int,
  str,
  list,
  stringMap,
  utf8Bytes,
  ABI_TYPE,
} from "./schema-kit";

/** The trigger configs (§8.3) and the Trigger variant for the given limits (./schemas.ts builds them in order). */
export function triggerSchemas(limits: DefinitionLimits) {
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
    fieldName: v.pipe(
      str(),
      v.minLength(1, "must not be empty"),
      v.description(
        "A decoded event argument by ABI name, optionally prefixed with the event name (`Transfer.value`); must exist in `contractAbi`.",
      ),
    ),
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

  return { manualData, ManualConfig, FixedTimeConfig, CronConfig, BlockConfig, EventCondition, EventQuery, EventConfig, Trigger };
}
