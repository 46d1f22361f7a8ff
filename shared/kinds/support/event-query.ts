/**
 * One query of the event trigger and of an await node's event wait (API.md §8.3.5, §8.4.11): the addresses and
 * topics a log must match, the conditions on its decoded arguments and the method calls made when it does.
 */
import * as v from "valibot";
import { ABI_TYPE, Bytes32, ContractAbi, LiteralMethodCall, int, list, opt, str, strict } from "./schema-kit";
import { AddressString } from "../../http/address-schemas";

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
export const EventQuery = strict(
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
export type EventQuery = v.InferOutput<typeof EventQuery>;
