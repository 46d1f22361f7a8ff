/**
 * What the execution modules share (execution.ts describes the storage): the stored shapes, the sizes that
 * place a step in items, and the in-process notification of a change.
 */
import { EventEmitter } from "node:events";
import type { ExecutionItem } from "../store/entities/execution";
import type { Cost, ExecutionStatus, Fee, Step, ValueFee } from "../engine/schemas";

export type Item = Record<string, unknown>;

/** Bytes of step JSON per step item: with keys and attribute names an item stays far below 400 KB. */
export const PART_BYTES = 350_000;
/** Step outputs up to this size (JSON bytes) stay inside the step's items; larger ones get items of their own. */
export const INLINE_OUTPUT_BYTES = 4_096;
export const lower = (address: string) => address.toLowerCase();

// ---------------------------------------------------------------------------------------------------------
// In-process notification: a status change reaches a stream in this process at once (others poll).

const changes = new EventEmitter();
changes.setMaxListeners(0);
const channel = (workflowId: string, id: string) => `${workflowId}/${id}`;

/** Calls `listener` whenever this process records a step or a status for the execution; returns the unsubscribe. */
export function onChange(workflowId: string, id: string, listener: () => void): () => void {
  changes.on(channel(workflowId, id), listener);
  return () => changes.off(channel(workflowId, id), listener);
}

/** How many listeners (open streams in this process) follow the execution. */
export const listenerCount = (workflowId: string, id: string) => changes.listenerCount(channel(workflowId, id));

/** Tells this process's listeners that the execution changed (a step or a status was recorded). */
export const emitChange = (workflowId: string, id: string) => changes.emit(channel(workflowId, id));

// ---------------------------------------------------------------------------------------------------------
// Stored shapes

/** The execution item as this module writes it (the store's ExecutionItem, its attributes typed). */
export interface StoredExecution extends ExecutionItem {
  id: string;
  workflowId: string;
  owner: string;
  chainId: number;
  index: number;
  startAt: number;
  endAt?: number;
  status: ExecutionStatus;
  error?: string;
  executionFee: Fee;
  valueFee: ValueFee;
  cogs?: Record<string, Cost>;
  triggerId: string;
  triggerStep?: string;
  stepIds?: Set<string>;
  /** Bytes of step JSON recorded so far (steps recorded before it existed are not counted: then absent). */
  stepBytes?: number;
}

/** An execution item read back, as this module wrote it. */
export const storedExecution = (item: ExecutionItem) => item as StoredExecution;

export interface StoredStep {
  position?: number;
  recordedAt: number;
  step: Step;
  /** The workflow whose definition holds the step's config (`config: null` in the step until read back). */
  configIn?: string;
}

/** A step as read back: its output in `step.output`, or (`outputParts` > 0) `null` there and in items of its own. */
export interface ReadStep extends StoredStep {
  /** Serialized bytes of the recorded output. */
  outputBytes: number;
  outputParts: number;
}
