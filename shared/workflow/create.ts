/** Create (§8.8.1): validation (§8.7 in order) and the first write, under the active cap (./slots.ts). */
import { ulid } from "ulid";
import { useOwner } from "../context";
import { ApiError } from "../errors";
import { createDefinitionItem, createItem, isOwnersWallet } from "../store/entities/workflow";
import { checksumAddress, type Address } from "../address";
import { validateDefinition } from "./definition";
import { startFiring } from "./scheduler/install";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import { type Item, type WorkflowInfo, toInfo, toItem } from "./stored";
import { takeSlot } from "./slots";
import { putExpiry } from "../store/entities/expiry";
import { useRuntime } from "../current-runtime";

// ---------------------------------------------------------------------------------------------------------
// Create (§8.8.1)

/** Canonical JSON (members sorted at every level, no spaces): the form whose UTF-8 size §4.1 limits. */
export function canonicalJson(value: unknown): string {
  const sort = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sort)
      : x !== null && typeof x === "object"
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sort((x as Item)[k])]),
          )
        : x;
  return JSON.stringify(sort(value));
}

/** §8.7 item 9: `address` is one of the owner's registered wallets on any chain (hidden ones included). */
const isRegisteredWallet = (owner: Address, address: Address) => isOwnersWallet(owner, address);

/** POST /workflows: validates (§8.7 in order), stores the workflow `enabled` holding a slot of the cap, answers it. */
export async function create(body: Record<string, unknown>): Promise<WorkflowInfo> {
  const owner = useOwner();
  const { config, now: clock } = useRuntime();
  const now = clock();
  const { definition } = validateDefinition(body, {
    mode: "create",
    now,
    limits: config.limits,
    chains: config.chains.map((c) => ({ chainId: c.chainId, blockTimeSeconds: c.blockTimeSeconds })),
    defaultChainId: config.defaultChainId,
  });

  const id = ulid(now);
  const record: WorkflowRecord = {
    id,
    owner: checksumAddress(owner),
    ...(definition.name !== undefined ? { name: definition.name } : {}),
    smartWalletAddress: checksumAddress(definition.smartWalletAddress),
    chainId: definition.chainId,
    trigger: definition.trigger,
    nodes: definition.nodes,
    edges: definition.edges,
    inputVariables: definition.inputVariables,
    status: "enabled",
    ...(definition.startAt !== undefined ? { startAt: definition.startAt } : {}),
    ...(definition.expiredAt !== undefined ? { expiredAt: definition.expiredAt } : {}),
    maxExecution: definition.maxExecution,
    executionCount: 0,
    createdAt: now,
    updatedAt: now,
    consecutiveErrors: 0,
    holdsSlot: true,
  };
  const info = toInfo(record, now);

  // Item 8: the stored document is the Workflow object as created.
  const size = Buffer.byteLength(canonicalJson(info), "utf8");
  if (size > config.limits.maxWorkflowBytes) {
    throw new ApiError(
      413,
      "PAYLOAD_TOO_LARGE",
      `The stored workflow document would be ${size} bytes; at most ${config.limits.maxWorkflowBytes} are allowed.`,
    );
  }
  // Item 9.
  if (!(await isRegisteredWallet(owner, record.smartWalletAddress))) {
    throw new ApiError(400, "WALLET_NOT_OWNED", "smartWalletAddress is not a wallet registered by the caller.", {
      errors: [{ path: "body.smartWalletAddress", message: "is not one of the caller's registered wallets" }],
    });
  }
  // Item 10, with the record in the same transaction.
  const { attributes, document } = toItem(record);
  const beside = [createDefinitionItem(id, document), ...(record.expiredAt === undefined ? [] : [putExpiry(id, record.expiredAt)])];
  await takeSlot(owner, () => createItem(id, owner, record.smartWalletAddress, attributes), beside);
  await startFiring(record, now);
  await Watch.watch(record, now);
  return info;
}
