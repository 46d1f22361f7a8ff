// The single table (shared/store/README.md lists its access patterns and keys).
export const table = new sst.aws.Dynamo("Table", {
  fields: {
    pk: "string",
    sk: "string",
    gsi1pk: "string",
    gsi1sk: "string",
    gsi2pk: "string",
    gsi2sk: "string",
    gsi3pk: "string",
    gsi3sk: "string",
  },
  primaryIndex: { hashKey: "pk", rangeKey: "sk" },
  globalIndexes: {
    // Keys only: the owners' lists (workflows, executions, a workflow's secrets) read a page's items by key, so a
    // write that keeps an item's keys (a claim's count, a run's start and finish) costs this index nothing.
    gsi1: { hashKey: "gsi1pk", rangeKey: "gsi1sk", projection: "keys-only" },
    gsi2: { hashKey: "gsi2pk", rangeKey: "gsi2sk" },
    // Keys only: the executions' sparse due keys and the workflows of a wallet.
    gsi3: { hashKey: "gsi3pk", rangeKey: "gsi3sk", projection: "keys-only" },
  },
  ttl: "expiresAt",
});

/**
 * What linking the table grants (SST's own link grants `dynamodb:*`): item reads and writes on the table and its
 * indexes, the store's Get, Put, Update, Delete, Query, BatchGet and TransactWrite (authorized per item action,
 * ConditionCheck included). No Scan, no table management. Functions read `Resource.Table.name`.
 */
export const TABLE_ACTIONS = [
  "dynamodb:GetItem",
  "dynamodb:BatchGetItem",
  "dynamodb:Query",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
  "dynamodb:DeleteItem",
  "dynamodb:ConditionCheckItem",
];
sst.Linkable.wrap(sst.aws.Dynamo, (dynamo) => ({
  properties: { name: dynamo.name },
  include: [sst.aws.permission({ actions: TABLE_ACTIONS, resources: [dynamo.arn, $interpolate`${dynamo.arn}/index/*`] })],
}));

/** GET /health's check of the table (core). */
export const tableDescribe = { actions: ["dynamodb:DescribeTable"], resources: [table.arn] };
