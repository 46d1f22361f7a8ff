/**
 * Lists on keys-only indexes (shared/store/query.ts `queryByKeys`): a page's items are read by key and filtered in
 * memory, so (1) a condition tested in memory must hold exactly where DynamoDB's FilterExpression holds, and (2) the
 * lists keep their order, paging and counts, the wallet list merging records on gsi3 with those written before it on gsi2.
 */
import { describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { BatchGetCommand, BatchWriteCommand, DeleteCommand, PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import { Placeholders, when, type Condition } from "../../shared/store/expression";
import { Keys } from "../../shared/store/item-keys";
import { listCount, listQuery, listWorkflows } from "../../shared/store/entities/workflow";
import { workflowStatusesOf } from "../../shared/store/entities/wallet";
import { queryOnce, queryPages } from "../../shared/store/query";
import { Index } from "../../shared/store/table";

const rt = await useTestRuntime();
const put = (item: Record<string, unknown>) => rt.db.send(new PutCommand({ TableName: rt.config.tableName, Item: item }));

describe("a condition tested in memory", () => {
  const pk = `FILTER#${randomUUID()}`;
  const items = [
    { sk: "a", status: "enabled", count: 1, max: 3, expiredAt: 100, costs: { n1: 5 } },
    { sk: "b", status: "disabled", count: 3, max: 3, name: "alpha" },
    { sk: "c", status: "completed", count: "3", max: 2, expiredAt: 50, costs: { n1: "5" } },
    { sk: "d", count: 10, max: 20, name: "beta", tags: new Set(["x"]) },
    { sk: "e", status: "enabled", count: 0, max: 0, expiredAt: 200, name: "al" },
  ];
  const conditions: Record<string, Condition> = {
    eq: when.eq("status", "enabled"),
    "eq on a number against a string": when.eq("count", 3),
    ne: when.ne("status", "enabled"),
    lt: when.lt("count", 3),
    "le against another attribute": when.le("count", when.attr("max")),
    "gt on strings": when.gt("name", "alpha"),
    ge: when.ge("expiredAt", 100),
    in: when.in("status", ["disabled", "completed"]),
    exists: when.exists("expiredAt"),
    notExists: when.notExists("status"),
    beginsWith: when.beginsWith("name", "al"),
    between: when.between("count", 1, 3),
    "nested path": when.eq(["costs", "n1"], 5),
    "and / or / not": when.and(when.or(when.eq("status", "enabled"), when.notExists("status")), when.not(when.lt("expiredAt", 150))),
    "or of missing attributes": when.or(when.notExists("expiredAt"), when.gt("expiredAt", 120)),
  };

  it("holds on exactly the items DynamoDB's FilterExpression keeps", async () => {
    for (const item of items) await put({ pk, ...item });
    for (const [name, condition] of Object.entries(conditions)) {
      const p = new Placeholders();
      const FilterExpression = condition.render(p);
      const out = await rt.db.send(
        new QueryCommand({
          TableName: rt.config.tableName,
          KeyConditionExpression: "pk = :pk",
          FilterExpression,
          ExpressionAttributeNames: p.names,
          ExpressionAttributeValues: { ...p.values, ":pk": pk },
        }),
      );
      const byDynamo = (out.Items ?? []).map((i) => i.sk);
      const inMemory = items.filter((i) => condition.test(i)).map((i) => i.sk);
      expect({ name, keeps: inMemory }).toEqual({ name, keeps: byDynamo });
      expect(Object.values(p.names)).toEqual(expect.arrayContaining([...condition.names]));
    }
  });
});

describe("lists on keys-only indexes", () => {
  it("the owner's workflows (gsi1): a page's items read by key, filtered, newest first, paged by cursor", async () => {
    const owner = `0x${randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
    const ids = ["01A", "01B", "01C", "01D", "01E"];
    for (const [i, id] of ids.entries())
      await put({
        ...Keys.workflow(id + owner),
        ...Keys.workflowByOwner(owner, id),
        id,
        status: i % 2 ? "disabled" : "enabled",
        type: "workflow",
      });

    const raw = await queryOnce({ index: Index.gsi1, pk: Keys.workflowByOwner(owner, "").gsi1pk, attributes: ["gsi1sk"] });
    expect(raw.items.map((i) => i.gsi1sk)).toEqual(ids); // keys alone: no read by key

    const enabled = listQuery(owner, { wallets: [], statuses: ["enabled"], now: 0 });
    const first = await listWorkflows(enabled, { limit: 2 });
    expect(first.items.map((i) => [i.id, i.status])).toEqual([
      ["01E", "enabled"],
      ["01C", "enabled"],
    ]);
    expect(first.hasNextPage).toBe(true);
    const second = await listWorkflows(enabled, { limit: 2, after: "01C" });
    expect(second.items.map((i) => i.id)).toEqual(["01A"]);
    expect([second.hasNextPage, second.hasPreviousPage]).toEqual([false, true]);
    expect(await listCount(enabled)).toBe(3);
    expect(await listCount(listQuery(owner, { wallets: [], statuses: [], now: 0 }))).toBe(5);
  });

  it("a wallet's workflows: records on gsi3 and records written before it on gsi2, merged in order, counted once each", async () => {
    const owner = `0x${randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
    const wallet = `0x${"ab".repeat(20)}`;
    const other = `0x${"cd".repeat(20)}`;
    const record = (id: string, keys: Record<string, string>, status: string) =>
      put({ ...Keys.workflow(id + owner), ...Keys.workflowByOwner(owner, id), ...keys, id, status, type: "workflow" });
    await record("01A", Keys.legacyWorkflowByWallet(owner, wallet, "01A"), "enabled");
    await record("01B", Keys.workflowByWallet(owner, wallet, "01B"), "disabled");
    await record("01C", Keys.legacyWorkflowByWallet(owner, wallet, "01C"), "failed");
    await record("01D", Keys.workflowByWallet(owner, wallet, "01D"), "enabled");
    await record("01E", Keys.workflowByWallet(owner, other, "01E"), "enabled");

    const mine = listQuery(owner, { wallets: [wallet], statuses: [], now: 0 });
    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await listWorkflows(mine, { limit: 2, after });
      pages.push(page.items.map((i) => String(i.id)));
      if (!page.hasNextPage) break;
      after = pages.at(-1)!.at(-1);
    }
    expect(pages).toEqual([
      ["01D", "01C"],
      ["01B", "01A"],
    ]);
    const before = await listWorkflows(mine, { limit: 2, before: "01B" });
    expect(before.items.map((i) => i.id)).toEqual(["01D", "01C"]);
    expect(await listCount(mine)).toBe(4);
    expect(await listCount(listQuery(owner, { wallets: [wallet], statuses: ["enabled"], now: 0 }))).toBe(2);

    const both = await listWorkflows(listQuery(owner, { wallets: [wallet, other], statuses: ["enabled"], now: 0 }), { limit: 10 });
    expect(both.items.map((i) => i.id)).toEqual(["01E", "01D", "01A"]);

    const statuses = (await workflowStatusesOf(owner, wallet)).map((s) => s.status).sort();
    expect(statuses).toEqual(["disabled", "enabled", "enabled", "failed"]);
  });

  it("a read of every page: pages of at most 800 keys, each read by key, filtered and counted across pages", async () => {
    const pk = `OWNER#0x${randomUUID().replaceAll("-", "")}#EXEC`;
    const items = Array.from({ length: 850 }, (_, i) => ({
      pk: `EXEC#${pk}`,
      sk: String(i).padStart(4, "0"),
      gsi1pk: pk,
      gsi1sk: String(i).padStart(4, "0"),
      status: i % 2 ? "failed" : "success",
    }));
    for (let i = 0; i < items.length; i += 25)
      await rt.db.send(
        new BatchWriteCommand({
          RequestItems: { [rt.config.tableName]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
        }),
      );
    const filter = when.eq("status", "success");
    const pages: number[] = [];
    let listed = 0;
    for await (const page of queryPages({ index: Index.gsi1, pk, filter, attributes: ["status"] })) {
      pages.push(page.count);
      listed += page.items.filter((i) => i.status === "success").length;
    }
    expect(pages).toEqual([400, 25]);
    expect(listed).toBe(425);
    let counted = 0;
    for await (const page of queryPages({ index: Index.gsi1, pk, filter, count: true })) counted += page.count;
    expect(counted).toBe(425);
  });

  it("reads again strongly what an eventually consistent read does not show yet, and leaves out what is gone", async () => {
    const owner = `0x${randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
    for (const id of ["01A", "01B", "01C"])
      await put({ ...Keys.workflow(id + owner), ...Keys.workflowByOwner(owner, id), id, status: "enabled" });
    await rt.db.send(new DeleteCommand({ TableName: rt.config.tableName, Key: Keys.workflow("01C" + owner) }));
    // A table whose eventually consistent reads lag (they show nothing yet) and whose index still lists 01C.
    const gone = { ...Keys.workflow("01C" + owner), ...Keys.workflowByOwner(owner, "01C") };
    const strong: number[] = [];
    const lagging = {
      tableName: rt.config.tableName,
      db: {
        send: async (command: unknown) => {
          if (command instanceof QueryCommand) {
            const out = await rt.db.send(command);
            return { ...out, Items: [gone, ...(out.Items ?? [])] };
          }
          if (!(command instanceof BatchGetCommand)) return rt.db.send(command as never);
          const keys = command.input.RequestItems![rt.config.tableName]!;
          if (!keys.ConsistentRead) return { Responses: { [rt.config.tableName]: [] } };
          strong.push(keys.Keys!.length);
          return rt.db.send(command);
        },
      } as unknown as typeof rt.db,
    };
    const page = await queryOnce({ index: Index.gsi1, pk: Keys.workflowByOwner(owner, "").gsi1pk, order: "desc" }, undefined, lagging);
    expect(page.items.map((i) => i.id)).toEqual(["01B", "01A"]); // 01C's entry outlived its item: left out
    expect(strong).toEqual([3]); // every key the lagging read did not show, read again strongly once
  });
});
