/**
 * The open waits of an execution as its answers show them (`waitingFor`, API.md §17.1.2), each as its kind's
 * handler shows it (./wait-kinds.ts: an internal wait is not shown); ./waits.ts ends them.
 */
import { openWaitsOf } from "../store/entities/execution";
import type { SHOWN_WAIT_KINDS } from "./schemas";
import { storedWait, waitKindOf } from "./wait-kinds";

type Item = Record<string, unknown>;

/** An element of `waitingFor` (§17.1.2). */
export interface WaitingFor {
  nodeId: string;
  name: string;
  kind: (typeof SHOWN_WAIT_KINDS)[number];
  since: number;
  deadline: number;
  prompt?: string;
  approvers?: string[];
}

/** The open waits of a pending or waiting execution as `waitingFor`, in node order; undefined when none is shown. */
export function waitingForOf(item: Item): WaitingFor[] | undefined {
  // A run that ended (swept, its workflow deleted) may leave waits behind: they are no longer open.
  if (item.status !== "pending" && item.status !== "waiting") return undefined;
  const waits = [...openWaitsOf(item)].flatMap(([nodeId, raw]) => {
    const wait = storedWait(raw);
    const shown = wait && waitKindOf(wait).shown(wait);
    return wait && shown ? [{ nodeId, position: wait.position, name: wait.name, since: wait.since, deadline: wait.deadline, shown }] : [];
  });
  if (waits.length === 0) return undefined;
  waits.sort((a, b) => a.position - b.position);
  return waits.map(({ nodeId, name, since, deadline, shown: { kind, ...shown } }) => ({ nodeId, name, kind, since, deadline, ...shown }));
}
