/**
 * Secrets (API.md §12): per-owner values, user-scoped or scoped to one of the owner's workflows, stored only
 * as envelope-encrypted ciphertext (shared/envelope/envelope.ts) and decrypted only for executions that use them.
 *
 * Access patterns (one table, see shared/store/README.md):
 *
 * | Who / when                       | Reads or writes                                  | Key                                                      |
 * |----------------------------------|--------------------------------------------------|----------------------------------------------------------|
 * | PUT /secrets/{name}              | replace (1 UpdateItem) or create (1 transaction) | Keys.secret(owner, name, workflowId?) + Keys.counter     |
 * | PUT / GET with workflowId        | the workflow, to check its owner (1 GetItem)     | Keys.workflow(id)                                        |
 * | GET /secrets                     | owner's secrets in list order (Query)            | pk = OWNER#…, sk begins with SECRET#                     |
 * | GET /secrets?workflowId=…        | that workflow's secrets (Query on GSI1)          | Keys.secretByWorkflow: gsi1pk per (owner, workflow)      |
 * | DELETE /secrets/{name}           | delete + counter decrement (1 transaction)       | Keys.secret + Keys.counter                               |
 * | the engine (resolveForExecution) | only the referenced names (1 BatchGetItem)       | Keys.secret for user and workflow scope of each name     |
 *
 * Sort key `SECRET#<name>#0` (user scope) or `SECRET#<name>#1#<workflowId>` gives exactly the list order of
 * API.md §3 (name in byte order, user scope first, then workflowId): `#` sorts below every name character.
 * GSI1's sort key repeats it, so a cursor position (the `sk`) is valid in the filtered and unfiltered list.
 *
 * Cap (max_secrets_per_owner): a counter item per owner changes only in the same transaction as a create
 * (condition: the secret does not exist and the count is below the cap) or a delete (condition: the secret
 * exists), so concurrent creates never pass the cap and a replace never counts.
 *
 * The plaintext value is never logged, never returned, and never part of an error.
 */
import * as v from "valibot";
import { useOwner } from "../context";
import { ApiError, notFound, quotaReached, validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { pageEnvelope, readPageParams } from "../http/paging";
import { createSecret, deleteSecret, listSecrets, readSecrets, replaceSecret, Secret, type SecretItem } from "../store/entities/secret";
import { workflowOwnerItem } from "../store/entities/workflow";
import { open, seal, type EncryptionContext, type Sealed } from "../envelope/envelope";
import { log } from "../log";
import { Info, ListQuery, NAME_PATTERN, Name, PutBody, RemoveQuery, isReservedName } from "./schemas";
import { useRuntime } from "../current-runtime";

const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const POSITION_PATTERN = /^SECRET#[A-Za-z_][A-Za-z0-9_]{0,127}#(0|1#[0-9A-HJKMNP-TV-Z]{26})$/;
const LIST_ENDPOINT = "GET /secrets";
const MAX_ATTEMPTS = 25;

type Scope = "user" | "workflow";

// ---------------------------------------------------------------------------------------------------------
// Validation in the order of API.md §1.6 step 6 and §12: path name, then body fields / query, then orgId.

const nameError = (name: unknown): FieldError[] =>
  v.is(Name, name) ? [] : fieldErrors(v.safeParse(Name, name).issues ?? [], "path").map((e) => ({ ...e, path: "path.name" }));

const reservedError = () =>
  validationFailed([{ path: "path.name", message: "names starting with ap_ (any letter case) are reserved" }], "SECRET_NAME_RESERVED");

const scopeUnsupported = (path: string) =>
  validationFailed([{ path, message: "organization-scoped secrets are not supported" }], "SECRET_SCOPE_UNSUPPORTED");

function unknownMembers(body: Record<string, unknown>, known: Record<string, unknown>, location: "body"): FieldError[] {
  return Object.keys(body)
    .filter((key) => !Object.hasOwn(known, key))
    .map((key) => ({ path: `${location}.${key}`, message: "is not a known field" }));
}

interface PutInput {
  name: string;
  value: string;
  workflowId?: string;
}

function parsePut(name: unknown, body: Record<string, unknown>): PutInput {
  const nameErrors = nameError(name);
  const parsed = v.safeParse(PutBody, body, { abortEarly: false });
  const bodyErrors = [...(parsed.success ? [] : fieldErrors(parsed.issues, "body")), ...unknownMembers(body, PutBody.entries, "body")];
  if (nameErrors.length > 0) throw validationFailed([...nameErrors, ...bodyErrors]);
  if (isReservedName(name as string)) throw reservedError();
  if (bodyErrors.length > 0 || !parsed.success) throw validationFailed(bodyErrors);
  if (parsed.output.orgId !== undefined && parsed.output.orgId !== null) throw scopeUnsupported("body.orgId");
  return { name: name as string, value: parsed.output.value, workflowId: parsed.output.workflowId };
}

/** The workflowId of a list or delete query, with its field errors (orgId is checked after them). */
function parseWorkflowQuery(
  schema: typeof ListQuery | typeof RemoveQuery,
  query: Record<string, string | undefined>,
): { workflowId?: string; errors: FieldError[] } {
  const parsed = v.safeParse(schema, { workflowId: query.workflowId, orgId: query.orgId }, { abortEarly: false });
  if (parsed.success) return { workflowId: parsed.output.workflowId, errors: [] };
  return { errors: fieldErrors(parsed.issues, "query") };
}

// ---------------------------------------------------------------------------------------------------------
// Storage helpers.

const scopeOf = (workflowId?: string): Scope => (workflowId ? "workflow" : "user");

/** The encryption context that binds a ciphertext to its identity (API.md §12.5). */
export function encryptionContext(owner: string, name: string, workflowId?: string): EncryptionContext {
  return { owner: owner.toLowerCase(), name, scope: scopeOf(workflowId), workflowId: workflowId ?? "" };
}

const sealedOf = ({ encryptedKey, iv, ciphertext, tag, keyId }: SecretItem): Sealed => ({ encryptedKey, iv, ciphertext, tag, keyId });

const toInfo = (item: SecretItem): Info => ({
  name: item.name,
  scope: item.scope as Scope,
  ...(item.scope === "workflow" ? { workflowId: item.workflowId } : {}),
  createdAt: item.createdAt,
  updatedAt: item.updatedAt,
});

const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * 10 * Math.min(attempt, 8)));

/** 404 WORKFLOW_NOT_FOUND unless the workflow exists and belongs to `owner` (same answer for both). */
async function requireOwnWorkflow(owner: string, workflowId: string) {
  const Item = await workflowOwnerItem(workflowId);
  if (!Item || Item.type !== "workflow" || typeof Item.owner !== "string" || Item.owner.toLowerCase() !== owner.toLowerCase()) {
    throw notFound("WORKFLOW_NOT_FOUND", "The workflow");
  }
}

// ---------------------------------------------------------------------------------------------------------
// Public functions.

/**
 * PUT /secrets/{name}: creates or replaces the caller's secret `name` (workflow-scoped when body.workflowId).
 * Returns "created" (201) or "replaced" (204).
 */
export async function put(name: unknown, body: Record<string, unknown>): Promise<"created" | "replaced"> {
  const owner = useOwner();
  const input = parsePut(name, body);
  if (input.workflowId) await requireOwnWorkflow(owner, input.workflowId);

  const { config, now } = useRuntime();
  const sealed = await seal(input.value, encryptionContext(owner, input.name, input.workflowId));
  const id = { owner, name: input.name, workflowId: input.workflowId };
  const max = config.limits.maxSecretsPerOwner;

  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const at = now();
    // 1. Replace an existing secret: keeps createdAt, never touches the counter.
    const replaced = await replaceSecret(id, at, sealed);
    if (replaced === "replaced") return "replaced";
    if (replaced === "conflict") {
      await backoff(attempt);
      continue;
    }
    // 2. It does not exist: create it and count it in one transaction.
    const created = await createSecret(id, { at, scope: scopeOf(input.workflowId), sealed }, max);
    if (created === "created") return "created";
    if (created === "exists") continue; // created meanwhile: replace it
    if (created === "full") throw quotaReached("SECRETS_LIMIT_REACHED", "secrets", max);
    await backoff(attempt); // TransactionConflict: another write on the same items; try again
  }
  log.warn("secret put gave up after repeated conflicts", { attempts: MAX_ATTEMPTS });
  throw new Error("Secret write kept conflicting with concurrent writes");
}

/** GET /secrets: one page of the caller's secret metadata in list order (API.md §3, §12.3). */
export async function list(query: Record<string, string | undefined>) {
  const owner = useOwner();
  // Field validation (§12.3 order: workflowId, orgId, then paging); field errors of one code are reported together.
  const { workflowId, errors } = parseWorkflowQuery(ListQuery, query);
  let page: ReturnType<typeof readPageParams> | undefined;
  let pageError: ApiError | undefined;
  try {
    page = readPageParams(query, LIST_ENDPOINT, owner);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    pageError = err;
  }
  if (errors.length > 0) {
    throw validationFailed([...errors, ...(pageError?.code === "VALIDATION_FAILED" ? (pageError.extra.errors ?? []) : [])]);
  }
  if (query.orgId !== undefined) throw scopeUnsupported("query.orgId");
  if (pageError || !page) throw pageError;
  for (const position of [page.after, page.before]) {
    if (position !== undefined && !POSITION_PATTERN.test(position)) {
      throw new ApiError(400, "INVALID_CURSOR", "The cursor is not valid for this list.");
    }
  }
  if (workflowId) await requireOwnWorkflow(owner, workflowId);

  const result = await listSecrets(owner, workflowId, page);
  return pageEnvelope(result, toInfo, (item) => item.sk, LIST_ENDPOINT, owner);
}

/** DELETE /secrets/{name}: removes the caller's secret of that identity if it exists (always 204). */
export async function remove(name: unknown, query: Record<string, string | undefined>): Promise<void> {
  const owner = useOwner();
  // A malformed name or workflowId first (reported together), then orgId; a reserved name simply matches nothing.
  const { workflowId, errors } = parseWorkflowQuery(RemoveQuery, query);
  const invalid = [...nameError(name), ...errors];
  if (invalid.length > 0) throw validationFailed(invalid);
  if (query.orgId !== undefined) throw scopeUnsupported("query.orgId");
  const id = { owner, name: name as string, workflowId };

  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const outcome = await deleteSecret(id);
    if (outcome === "deleted" || outcome === "absent") return;
    if (outcome === "uncounted") {
      // The counter is missing or zero although the secret existed (never written by this module): deleted anyway.
      log.warn("secret counter out of step; deleting without decrement", { owner: owner.toLowerCase() });
      return;
    }
    await backoff(attempt);
  }
  log.warn("secret delete gave up after repeated conflicts", { attempts: MAX_ATTEMPTS });
  throw new Error("Secret delete kept conflicting with concurrent writes");
}

/**
 * The engine's decrypt-for-execution: the values of `names` for a run of `workflowId` by `owner`.
 * Each name resolves to the workflow-scoped secret if one exists, else the user-scoped one; names with
 * neither (or that are not valid secret names) are absent from the result. Only the asked-for names are read
 * and decrypted.
 */
export async function resolveForExecution(owner: string, workflowId: string | undefined, names: string[]): Promise<Record<string, string>> {
  const wf = workflowId && ULID_PATTERN.test(workflowId.toUpperCase()) ? workflowId.toUpperCase() : undefined;
  const wanted = [...new Set(names)].filter((n) => NAME_PATTERN.test(n) && !isReservedName(n));
  if (wanted.length === 0) return {};
  const ids = wanted.flatMap((name) => [{ owner, name }, ...(wf ? [{ owner, name, workflowId: wf }] : [])]);
  const found = await readSecrets(ids, MAX_ATTEMPTS, backoff);
  const entries = await Promise.all(
    wanted.map(async (n) => {
      const sk = (workflowId?: string) => Secret.key({ owner, name: n, workflowId }).sk;
      const item = (wf ? found.get(sk(wf)) : undefined) ?? found.get(sk());
      if (!item || item.type !== Secret.type) return undefined;
      const itemWorkflow = item.scope === "workflow" ? item.workflowId : undefined;
      const value = await open(sealedOf(item), encryptionContext(owner, n, itemWorkflow));
      return [n, value] as const;
    }),
  );
  return Object.fromEntries(entries.filter((e): e is readonly [string, string] => e !== undefined));
}
