/** The open waits of an execution as its answers show them (`waitingFor`, API.md §17.1.2); ./waits.ts ends them. */
import { openWaitsOf } from "../store/entities/execution";

type Item = Record<string, unknown>;

/** A wait as the execution item holds it. */
export interface StoredWait {
  kind: "signal" | "chainEvent";
  name: string;
  /** The node's index in `nodes` (waitingFor is in node order). */
  position: number;
  since: number;
  deadline: number;
  prompt?: string;
  approvers?: string[];
  chainId?: number;
  /** The node's config (JSON text), for its step. */
  config: string;
  inputs: string[];
}

/** An element of `waitingFor` (§17.1.2). */
export interface WaitingFor {
  nodeId: string;
  name: string;
  kind: "signal" | "chainEvent";
  since: number;
  deadline: number;
  prompt?: string;
  approvers?: string[];
}

/** The open waits of a pending or waiting execution as `waitingFor`, in node order; undefined when none is open. */
export function waitingForOf(item: Item): WaitingFor[] | undefined {
  // A run that ended (swept, its workflow deleted) may leave waits behind: they are no longer open.
  if (item.status !== "pending" && item.status !== "waiting") return undefined;
  const waits = [...openWaitsOf(item)].map(([nodeId, w]) => ({ nodeId, ...(w as unknown as StoredWait) }));
  if (waits.length === 0) return undefined;
  waits.sort((a, b) => a.position - b.position);
  return waits.map((w) => ({
    nodeId: w.nodeId,
    name: w.name,
    kind: w.kind,
    since: w.since,
    deadline: w.deadline,
    ...(w.prompt !== undefined ? { prompt: w.prompt } : {}),
    ...(w.kind === "signal" ? { approvers: w.approvers ?? [] } : {}),
  }));
}
