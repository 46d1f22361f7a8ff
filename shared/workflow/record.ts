/** The stored workflow record's type (the modules of ./workflow.ts read and write it; the scheduler port takes it). */
import type { Address } from "../address";
import type { COMPLETION_REASONS, Edge } from "./schemas";
import type { Node, Trigger } from "../kinds/shapes";

export type StoredStatus = "enabled" | "disabled" | "completed" | "failed";
export type CompletionReason = (typeof COMPLETION_REASONS)[number];

/** The stored record (item attributes besides the keys, `type` and `v`). */
export interface WorkflowRecord {
  id: string;
  /** EIP-55. */
  owner: Address;
  name?: string;
  smartWalletAddress: Address;
  chainId: number;
  trigger: Trigger & { id: string };
  nodes: Node[];
  edges: Edge[];
  inputVariables: Record<string, unknown>;
  /** Stored status; read it through `effectiveStatus`. */
  status: StoredStatus;
  startAt?: number;
  expiredAt?: number;
  maxExecution: number;
  executionCount: number;
  lastRanAt?: number;
  createdAt: number;
  updatedAt: number;
  completionReason?: CompletionReason;
  completedAt?: number;
  /** Executions ended `error` in a row (reset by `success` or `failed`). */
  consecutiveErrors: number;
  /** Counted in the owner's active-workflow counter (./workflow.ts, module header). */
  holdsSlot: boolean;
}
