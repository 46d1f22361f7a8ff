/**
 * Key builders, one per entity. Handlers never concatenate key strings themselves.
 * Owners are stored as lower-case addresses in keys so that case never splits a partition.
 */
const lower = (address: string) => address.toLowerCase();

export const Keys = {
  owner: (owner: string) => `OWNER#${lower(owner)}`,

  /** Secrets: owner partition, ordered by name, user scope (0) before workflow scope (1), then workflow id. */
  secret: (owner: string, name: string, workflowId?: string) => ({
    pk: Keys.owner(owner),
    sk: workflowId ? `SECRET#${name}#1#${workflowId}` : `SECRET#${name}#0`,
  }),
  secretPrefix: "SECRET#",
  /** GSI1 of a workflow-scoped secret: that workflow's secrets by name. */
  secretByWorkflow: (owner: string, workflowId: string, name: string) => ({
    gsi1pk: `${Keys.owner(owner)}#WF#${workflowId}#SECRETS`,
    gsi1sk: `SECRET#${name}`,
  }),

  /** Per-owner counters guarded by conditional updates (secrets, wallets per chain, active workflows). */
  counter: (owner: string, name: string) => ({ pk: Keys.owner(owner), sk: `COUNTER#${name}` }),

  /** Wallets: owner partition, one per (chain, factory, salt). */
  wallet: (owner: string, chainId: number, factory: string, salt: string) => ({
    pk: Keys.owner(owner),
    sk: `WALLET#${chainId}#${lower(factory)}#${salt}`,
  }),
  walletPrefix: (chainId: number) => `WALLET#${chainId}#`,
  /** GSI1 of a wallet: the owner's wallets on a chain by address (update, withdraw, nonce are keyed by address). */
  walletByAddress: (owner: string, chainId: number, address: string) => ({
    gsi1pk: `${Keys.owner(owner)}#WALLETADDR#${chainId}`,
    gsi1sk: lower(address),
  }),

  /** Withdrawals: owner partition, per wallet and chain, newest first by ULID. */
  withdrawal: (owner: string, chainId: number, wallet: string, id: string) => ({
    pk: Keys.owner(owner),
    sk: `${Keys.withdrawalPrefix(chainId, wallet)}${id}`,
  }),
  withdrawalPrefix: (chainId: number, wallet: string) => `WITHDRAWAL#${chainId}#${lower(wallet)}#`,

  /** Idempotency records: one per (owner, scope, key), expiring after idempotency_ttl_s. */
  idempotency: (owner: string, scope: string, key: string) => ({
    pk: `IDEM#${lower(owner)}#${scope}`,
    sk: `KEY#${key}`,
  }),
} as const;
