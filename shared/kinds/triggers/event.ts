/**
 * event (API.md §8.3.5): fires per matching log of its queries (addresses, topics, conditions on decoded
 * arguments), at most `maxEventsPerBlock` per block, `cooldownSeconds` apart. Step output: the log
 * `{address, blockNumber, transactionHash, logIndex, topics, data, ...decoded}` (§8.3.6).
 */
import { ChainId, int, list, opt, strict } from "../support/schema-kit";
import { EventQuery } from "../support/event-query";
import { defineTrigger, triggerShape, type Add, type Raw } from "../kind";
import { eventArgument, methodCallProblems } from "../support/abi";

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
