/**
 * The event-bus port (ARCHITECTURE.md): how a claimed execution reaches a runner. The trigger publishes
 * `execution.requested`; the runner consumes it. The interface alone; its adapters are one file each:
 * - ./in-process.ts (`npm start`, tests): delivery on a later turn of the event loop to every subscriber, so the
 *   publisher's request answers first, as it does in AWS;
 * - ./sqs-publisher.ts (AWS): SendMessage to the runner queue (infra/bus.ts) in the owner's message group; the
 *   runner function reads it through ./sqs.ts, with retries and a dead-letter queue. The subscription there is
 *   infrastructure (an event source mapping), not code.
 * The host installs one (./install.ts: `setBus`); domain code publishes through `requireBus()`.
 * Delivery is at least once in both: consumers must be idempotent (the runner is, per execution id).
 */

/** An execution was claimed and written `pending`; a runner should run it. */
interface ExecutionRequested {
  type: "execution.requested";
  workflowId: string;
  executionId: string;
  /** The workflow's owner: runs queue per owner (run-queue.ts). Absent on events from before it was added. */
  owner?: string;
  /** A waiting execution whose wait ended: resume it (API.md §17.1), rather than start it. */
  resume?: boolean;
  /** The state it waits on, as the publisher read it: the resume's conditional update needs no read of its own. */
  from?: { generation: number; pendingMs: number };
}
export type BusEvent = ExecutionRequested;

export type BusHandler = (event: BusEvent) => Promise<void>;

export interface EventBus {
  /**
   * Delivers to another process (the runner queue → the runner function): a blocking trigger then hands its run over
   * and waits for the record, instead of running it in this process, which a Lambda freezes once it answers.
   */
  readonly remote?: boolean;
  publish(event: BusEvent): Promise<void>;
  /** Adds a handler for every event published from now on; returns the unsubscribe function. */
  subscribe(handler: BusHandler): () => void;
}
