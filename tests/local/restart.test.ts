/**
 * Secrets survive a restart of the local components: DynamoDB Local keeps its data on disk and the KMS
 * endpoint reuses its master key from the same data directory, so the stored ciphertext decrypts again.
 * This file starts its own DynamoDB Local and KMS endpoint (not the suite's shared ones).
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import { startDynamoLocal, type LocalDynamo } from "../../local/dynamodb";
import { startKmsEndpoint, type KmsEndpoint } from "../../local/kms-endpoint";
import { buildConfig } from "../../shared/config";
import { createRuntime } from "../../shared/runtime";
import { ensureTable } from "../../shared/store/table";
import { withCaller } from "../../shared/context";
import * as Secret from "../../shared/secret/secret";
import { insertWorkflow } from "../support/fixtures";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

const dataDir = mkdtempSync(join(tmpdir(), "wa-restart-"));
let dynamo: LocalDynamo | undefined;
let kms: KmsEndpoint | undefined;
let runtime: Runtime | undefined;

async function start(): Promise<Runtime> {
  [dynamo, kms] = await Promise.all([startDynamoLocal(join(dataDir, "dynamodb")), startKmsEndpoint({ dataDir })]);
  runtime = createRuntime({
    config: buildConfig({ DYNAMODB_ENDPOINT: dynamo.endpoint, KMS_ENDPOINT: kms.url, TABLE_NAME: "restart", LOG_LEVEL: "error" }),
  });
  setRuntime(runtime);
  await ensureTable(runtime.db, runtime.config.tableName);
  return runtime;
}

async function stop() {
  runtime?.db.destroy();
  runtime?.kms?.destroy();
  await Promise.all([dynamo?.stop(), kms?.stop()]);
  dynamo = kms = runtime = undefined;
}

afterAll(async () => {
  await stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("restart", () => {
  it(
    "resolves the same plaintext after DynamoDB Local and the KMS endpoint restart on the same data directory",
    { timeout: 180_000 },
    async () => {
      const owner = getAddress(`0x${randomBytes(20).toString("hex")}`);
      const caller = { owner, audienceChainId: 31337 };
      const first = await start();
      const firstKms = first.config.kmsEndpoint;
      const wf = await insertWorkflow(owner);
      await withCaller(caller, async () => {
        expect(await Secret.put("USER_ONLY", { value: "user value ✓" })).toBe("created");
        expect(await Secret.put("BOTH", { value: "user both" })).toBe("created");
        expect(await Secret.put("BOTH", { value: "workflow both", workflowId: wf })).toBe("created");
      });
      const before = await Secret.resolveForExecution(owner, wf, ["USER_ONLY", "BOTH"]);
      expect(before).toEqual({ USER_ONLY: "user value ✓", BOTH: "workflow both" });

      await stop();
      const second = await start();
      expect(second.config.kmsEndpoint).not.toBe(firstKms); // a new process on a new port, same data directory

      expect(await Secret.resolveForExecution(owner, wf, ["USER_ONLY", "BOTH"])).toEqual(before);
      expect(await Secret.resolveForExecution(owner, undefined, ["BOTH"])).toEqual({ BOTH: "user both" });
      await withCaller(caller, async () => {
        const page = await Secret.list({});
        expect(page.data.map((d) => `${d.name}/${d.scope}`)).toEqual(["BOTH/user", "BOTH/workflow", "USER_ONLY/user"]);
        // The counter survived as well: a replace stays a replace.
        expect(await Secret.put("USER_ONLY", { value: "after restart" })).toBe("replaced");
      });
      expect(await Secret.resolveForExecution(owner, undefined, ["USER_ONLY"])).toEqual({ USER_ONLY: "after restart" });
    },
  );
});
