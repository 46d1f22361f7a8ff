/**
 * One handler per kind of wait (shared/kinds/kind.ts `WaitKind`): how the execution item stores it, what is
 * written before it opens, how `waitingFor` shows it (API.md §17.1.2), which end resolves it before its deadline,
 * and how it ends at its deadline. `WAIT_KINDS` is typed to hold a handler for every kind, so a kind added to the
 * union without one fails to compile. ./waits.ts begins and ends waits through it, ./waiting-for.ts shows them.
 *
 * - signal: ended by `POST /executions/{id}:signal` (./signal.ts); at its deadline, AWAIT_TIMEOUT.
 * - chainEvent: its watch entry is written before it opens, so no log after `afterBlock` can be missed; ended by
 *   the chain watcher (shared/watch/chain-waits.ts); at its deadline, AWAIT_TIMEOUT.
 * - timer: internal (never shown, no node of the API emits it); nothing ends it but its deadline, when its step
 *   succeeds: the sweeper's pass over due waits (`endDueWaits`) or the run itself ends it, and the run resumes.
 */
import type { StepErrorCode, WaitKind, WaitOf } from "../kinds/kind";
import { putAwaitWatch } from "../store/entities/watch";
import type { ExecutionId } from "../store/entities/execution";
import type { SHOWN_WAIT_KINDS } from "./schemas";

/** What the execution item keeps of every wait (attribute `wait:<nodeId>`) besides its kind. */
type StoredCommon = {
  name: string;
  /** The node's index in `nodes` (waitingFor is in node order). */
  position: number;
  since: number;
  deadline: number;
  /** The node's config (JSON text), for its step. */
  config: string;
  inputs: string[];
};

/** What it keeps besides, by kind. */
type StoredKinds = {
  signal: { prompt?: string; approvers?: string[] };
  chainEvent: { prompt?: string; chainId?: number };
  /** The type of the node that waits (an await node's step is `await`). */
  timer: { type: string };
};

/** A stored wait of kind `K` (of any kind in `K`). */
type StoredOf<K extends WaitKind> = { [P in K]: { kind: P } & StoredCommon & StoredKinds[P] }[K];

/** A wait as the execution item holds it. */
export type StoredWait = StoredOf<WaitKind>;

/** The node that waits, as the run's host knows it. */
export interface WaitingNode {
  id: string;
  type: string;
  name: string;
  position: number;
  config: unknown;
}

/** How a wait shows in `waitingFor`, besides its node, name and times. */
interface Shown {
  kind: (typeof SHOWN_WAIT_KINDS)[number];
  prompt?: string;
  approvers?: string[];
}

/** The step's outcome when a wait ends at its deadline. */
type Expiry =
  | { success: true; output: Record<string, unknown> }
  | { success: false; error: string; errorCode: StepErrorCode; output: Record<string, unknown> };

interface WaitHandler<K extends WaitKind> {
  /** What the item keeps of the wait: what every wait keeps (`common`), and what its kind keeps. */
  stored(wait: WaitOf<K>, node: WaitingNode, common: StoredCommon): StoredOf<K>;
  /** Written before the wait opens (an entry whose wait never opened ends nothing). */
  opening?(execution: ExecutionId & { owner: string }, node: WaitingNode, wait: WaitOf<K>): Promise<void>;
  /** The wait in `waitingFor`, or undefined for an internal wait. */
  shown(wait: StoredOf<K>): Shown | undefined;
  /** The end that resolves it before its deadline (./waits.ts `WaitEnd`), if any. */
  endedBy?: "signal" | "event";
  /** The type of the step that the end records. */
  stepType(wait: StoredOf<K>): string;
  /** How it ends at its deadline. */
  expired(wait: StoredOf<K>): Expiry;
}

const timedOut = (what: string, deadline: number): Expiry => ({
  success: false,
  error: `no ${what} before the deadline (${new Date(deadline).toISOString()})`,
  errorCode: "AWAIT_TIMEOUT",
  output: { data: null },
});

const prompted = (prompt: string | undefined) => (prompt !== undefined ? { prompt } : {});

const WAIT_KINDS: { [K in WaitKind]: WaitHandler<K> } = {
  signal: {
    stored: (wait, _node, common) => ({ kind: "signal", ...common, ...prompted(wait.prompt), approvers: wait.approvers }),
    shown: (wait) => ({ kind: "signal", ...prompted(wait.prompt), approvers: wait.approvers ?? [] }),
    endedBy: "signal",
    stepType: () => "await",
    expired: (wait) => timedOut("signal", wait.deadline),
  },
  chainEvent: {
    stored: (wait, _node, common) => ({ kind: "chainEvent", ...common, ...prompted(wait.prompt), chainId: wait.chainId }),
    opening: (execution, node, wait) =>
      putAwaitWatch({
        workflowId: execution.workflowId,
        executionId: execution.id,
        nodeId: node.id,
        owner: execution.owner,
        chainId: wait.chainId,
        queries: wait.query,
        afterBlock: wait.afterBlock,
        deadline: wait.deadline,
      }),
    shown: (wait) => ({ kind: "chainEvent", ...prompted(wait.prompt) }),
    endedBy: "event",
    stepType: () => "await",
    expired: (wait) => timedOut("matching event", wait.deadline),
  },
  timer: {
    stored: (_wait, node, common) => ({ kind: "timer", ...common, type: node.type }),
    shown: () => undefined,
    stepType: (wait) => wait.type,
    expired: (wait) => ({ success: true, output: { data: { at: wait.deadline } } }),
  },
};

/** The handler of a wait's kind. */
export const waitKindOf = <K extends WaitKind>(wait: { kind: K }): WaitHandler<K> => WAIT_KINDS[wait.kind];

const isWaitKind = (kind: unknown): kind is WaitKind => typeof kind === "string" && Object.hasOwn(WAIT_KINDS, kind);

/** The wait an item's `wait:<nodeId>` attribute holds; undefined when there is none (or of no kind known here). */
export const storedWait = (raw: Record<string, unknown> | undefined): StoredWait | undefined =>
  raw !== undefined && isWaitKind(raw.kind) ? (raw as StoredWait) : undefined;
