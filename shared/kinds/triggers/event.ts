/**
 * event (API.md §8.3.5): fires per matching log of its queries (addresses, topics, conditions on decoded
 * arguments), at most `maxEventsPerBlock` per block, `cooldownSeconds` apart. Step output: the log
 * `{address, blockNumber, transactionHash, logIndex, topics, data, ...decoded}` (§8.3.6).
 */
import * as v from "valibot";
import { ABI_TYPE, AddressString, Bytes32, ChainId, ContractAbi, LiteralMethodCall, int, list, opt, str, strict } from "../support/schema-kit";
import { defineTrigger, triggerShape, type Add, type Raw } from "../kind";
import { eventArgument, methodCallProblems } from "../support/abi";

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

const arrayOf = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);

export const eventShape = triggerShape({
  type: "event",
  doc: "Fires per matching log of its queries; output the log and its decoded arguments.",
  config: () =>
    strict({
      queries: list(EventQuery, 1, 10, "queries"),
      cooldownSeconds: opt(int(0, 86_400), 0),
      chainId: opt(ChainId),
    }),
  chainAware: true,
});

export const event = /* @__PURE__ */ defineTrigger(eventShape, {
  problems(config, at, add) {
    arrayOf(config.queries).forEach((query, q) => {
      if (isObject(query)) eventQueryProblems(query, `${at}.queries[${q}]`, add);
    });
  },
});

function eventQueryProblems(query: Raw, at: string, add: Add) {
  const addresses = arrayOf(query.addresses);
  const topic0 = arrayOf(query.topics)[0];
  if (addresses.length === 0 && (topic0 === undefined || topic0 === null || topic0 === "")) {
    add(at, "must set at least one address or a non-null topics[0]");
  }
  const conditions = arrayOf(query.conditions);
  const abi = Array.isArray(query.contractAbi) ? query.contractAbi : undefined;
  if (conditions.length > 0 && !abi) add(`${at}.contractAbi`, "is required when conditions are set");
  if (abi) {
    conditions.forEach((condition, c) => {
      if (!isObject(condition) || typeof condition.fieldName !== "string") return;
      const argument = eventArgument(abi, condition.fieldName);
      if (!argument) {
        add(`${at}.conditions[${c}].fieldName`, `names no event argument in contractAbi: ${condition.fieldName}`);
        return;
      }
      const type = typeof condition.fieldType === "string" ? condition.fieldType : argument.type;
      if (type === "address" && typeof condition.operator === "string" && !["eq", "ne"].includes(condition.operator)) {
        add(`${at}.conditions[${c}].operator`, "must be eq or ne for an address");
      }
    });
  }
  methodCallProblems(arrayOf(query.methodCalls), abi, `${at}.methodCalls`, add);
}
