/**
 * Secrets (API.md §12; shared/secret/secret.ts): one item per (owner, name, scope) in the owner's partition
 * (sort key `SECRET#<name>#0` or `#1#<workflowId>`), workflow-scoped ones also on GSI1 per (owner, workflow).
 * Owned here: the cap (a create and the owner's `secrets` counter in one transaction, a replace never counts, a
 * delete and its decrement in one transaction), the list's two access patterns and the batch read of the engine.
 */
import { defineEntity, transact, type Stored } from "../entity";
import { setAll, when } from "../expression";
import { decrement, incrementBelow } from "../counters";
import { Keys } from "../item-keys";
import type { ListPage } from "../query";
import { Index, classifyWriteFailure, failedConditions, isConditionFailure } from "../table";

export interface SecretId {
  owner: string;
  name: string;
  workflowId?: string;
}

/** The envelope-encrypted value as stored (shared/envelope/envelope.ts Sealed). */
export interface SealedValue {
  encryptedKey: string;
  iv: string;
  ciphertext: string;
  tag: string;
  keyId: string;
}

/** A secret's attributes: its identity, its scope (`user` or `workflow`), times, and the sealed value. */
export interface SecretItem extends SealedValue {
  owner: string;
  name: string;
  scope: string;
  workflowId?: string;
  createdAt: number;
  updatedAt: number;
}

export const Secret = defineEntity<SecretItem, SecretId>({
  type: "secret",
  version: 1,
  key: ({ owner, name, workflowId }) => Keys.secret(owner, name, workflowId),
});

/**
 * Replaces an existing secret's value (keeps createdAt, never touches the counter). "absent" when there is none;
 * "conflict" when a transaction on the item was in progress (try again).
 */
export async function replaceSecret(id: SecretId, at: number, sealed: SealedValue): Promise<"replaced" | "absent" | "conflict"> {
  try {
    const { encryptedKey, iv, ciphertext, tag, keyId } = sealed;
    await Secret.update(id, setAll({ updatedAt: at, encryptedKey, iv, ciphertext, tag, keyId }), { if: when.exists() });
    return "replaced";
  } catch (err) {
    const failure = classifyWriteFailure(err);
    if (failure === "retry") return "conflict"; // still conflicting after the store's own attempts
    if (failure === "condition") return "absent";
    throw err;
  }
}

/**
 * Creates the secret and counts it, in one transaction, only while it does not exist and the owner has fewer than
 * `max`: "exists" (created meanwhile), "full" (at the cap), "conflict" (another write on the items: try again).
 */
export async function createSecret(
  id: SecretId,
  fields: { at: number; scope: string; sealed: SealedValue },
  max: number,
): Promise<"created" | "exists" | "full" | "conflict"> {
  const item: SecretItem = {
    ...(id.workflowId ? Keys.secretByWorkflow(id.owner, id.workflowId, id.name) : {}),
    owner: id.owner.toLowerCase(),
    name: id.name,
    scope: fields.scope,
    ...(id.workflowId ? { workflowId: id.workflowId } : {}),
    createdAt: fields.at,
    updatedAt: fields.at,
    ...fields.sealed,
  };
  try {
    await transact([Secret.tx.put(id, item, { if: when.notExists() }), incrementBelow(id.owner, "secrets", max)]);
    return "created";
  } catch (err) {
    const [secretFailed, counterFailed] = failedConditions(err);
    if (secretFailed) return "exists";
    // At the cap, and the secret did not exist when the transaction was evaluated.
    if (counterFailed) return "full";
    return "conflict";
  }
}

/**
 * Deletes the secret and uncounts it, in one transaction: "absent" when there was none; "uncounted" when the
 * counter is missing or zero although the secret exists (it is then deleted without decrement); "conflict": try again.
 */
export async function deleteSecret(id: SecretId): Promise<"deleted" | "absent" | "uncounted" | "conflict"> {
  try {
    await transact([Secret.tx.delete(id, { if: when.exists() }), decrement(id.owner, "secrets")]);
    return "deleted";
  } catch (err) {
    const [secretFailed, counterFailed] = failedConditions(err);
    if (secretFailed) return "absent";
    if (!counterFailed) return "conflict";
  }
  try {
    await Secret.delete(id, { if: when.exists() });
  } catch (e) {
    if (!isConditionFailure(e)) throw e;
  }
  return "uncounted";
}

/** One page of the owner's secrets in list order (API.md §3), or of one workflow's (GSI1); positions are `sk`. */
export function listSecrets(
  owner: string,
  workflowId: string | undefined,
  page: { limit: number; after?: string; before?: string },
): Promise<ListPage<Stored<SecretItem>>> {
  const paging = {
    sk: { beginsWith: Keys.secretPrefix },
    order: "asc" as const,
    limit: page.limit,
    after: page.after,
    before: page.before,
  };
  return Secret.list(
    workflowId
      ? { index: Index.gsi1, pk: Keys.secretByWorkflow(owner, workflowId, "").gsi1pk, ...paging }
      : { pk: Keys.owner(owner), ...paging },
  );
}

/**
 * The secrets of `ids` that exist, by sort key (strongly consistent BatchGetItem, 100 keys a request, unprocessed
 * keys read again after a backoff; throws after `maxAttempts` rounds of one request).
 */
export async function readSecrets(ids: SecretId[], maxAttempts: number, backoff: (attempt: number) => Promise<unknown>) {
  const keys = ids.map((id) => Secret.key(id));
  const found = new Map<string, Stored<SecretItem>>();
  for (let i = 0; i < keys.length; i += 100) {
    let pending = keys.slice(i, i + 100);
    for (let attempt = 1; pending.length > 0; attempt++) {
      if (attempt > maxAttempts) throw new Error("Secret reads kept being throttled");
      if (attempt > 1) await backoff(attempt);
      const out = await Secret.batchGet(pending, { consistent: true });
      for (const item of out.items) found.set(item.sk, item);
      pending = out.unprocessed;
    }
  }
  return found;
}
