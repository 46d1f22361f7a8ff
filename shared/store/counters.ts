/**
 * Per-owner counters that guard caps (secrets, wallets per chain, later active workflows). Each is changed
 * only inside the same transaction as the record it counts, so a cap holds under concurrency and a failed
 * or retried write never double-counts.
 */
const VERSION = 1;

/** Transaction item: +1, only while the count is below `max`. */
export function incrementBelow(tableName: string, key: { pk: string; sk: string }, max: number) {
  return {
    Update: {
      TableName: tableName,
      Key: key,
      UpdateExpression: "SET #count = if_not_exists(#count, :zero) + :one, #type = :type, #v = :v",
      ConditionExpression: "attribute_not_exists(#count) OR #count < :max",
      ExpressionAttributeNames: { "#count": "count", "#type": "type", "#v": "v" },
      ExpressionAttributeValues: { ":zero": 0, ":one": 1, ":max": max, ":type": "counter", ":v": VERSION },
    },
  };
}

/** Transaction item: -1, never below zero. */
export function decrement(tableName: string, key: { pk: string; sk: string }) {
  return {
    Update: {
      TableName: tableName,
      Key: key,
      UpdateExpression: "SET #count = #count - :one",
      ConditionExpression: "#count > :zero",
      ExpressionAttributeNames: { "#count": "count" },
      ExpressionAttributeValues: { ":zero": 0, ":one": 1 },
    },
  };
}
