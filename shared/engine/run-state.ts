/**
 * A run's state as it changes event by event (shared/engine/run.ts drives it): how each decided node ended, the
 * outputs later nodes read, branch choices, the waits open, the steps in flight, the budgets, the steps recorded, and
 * how the run ends (stopped, failed inside the engine, or suspended). A resumed run restores it from the snapshot an
 * earlier pass left (`snapshot()`).
 */
import type { Config } from "../config";
import type { Cost, Step } from "./schemas";
import { createRedactor, type Redactor } from "../secret/redact";
import { ExecutionBudget } from "./budget";
import { JsonText, stringify } from "../json-text";
import { SandboxSession } from "../sandbox/session";
import type { EndedWait, RunInput, RunResult, RunSnapshot } from "./types";
import type { Node } from "../kinds/shapes";

const DEFAULT_STOP_REASON = "execution stopped";
const DEFAULT_DEADLINE_REASON = "execution timed out";
export const INTERNAL_ERROR = "internal error: the engine could not run the workflow";

type Settled = "succeeded" | "failed" | "skipped";

/**
 * How a run ends before its graph runs out: stopped (no node starts any more), suspended with waits open, or failed
 * inside the engine. A failure outweighs the others and the first one is kept; the run ends `error` with a generic
 * message.
 */
type Ending = { kind: "stopped"; reason: string } | { kind: "suspended" } | { kind: "failed"; error: unknown };
type StepSummary = RunSnapshot["steps"][number];

const summary = (s: StepSummary): StepSummary => ({ id: s.id, name: s.name, startAt: s.startAt, success: s.success });

export class RunState {
  /** The execution's budgets: state bytes and requests (API.md §18.2, §18.3), JavaScript time (§18.1). */
  readonly budget: ExecutionBudget;
  readonly sandbox: SandboxSession;
  /** Every resolved secret → `***`; none until the run has read its secrets. */
  redactor: Redactor = createRedactor([]);

  private readonly nodes: Map<string, Node>;
  private readonly position: Map<string, number>;
  private readonly restored: RunSnapshot | undefined;
  /** How every decided node ended. */
  private readonly settled: Map<string, Settled>;
  /** Step outputs as JSON text: what later templates read (by path) and scripts receive (§18.2). */
  private readonly outputs: Map<string, JsonText>;
  /** Branch choices. */
  private readonly choices: Map<string, string | null>;
  /** The steps in flight, each until its task has finished. */
  private readonly running = new Map<string, Promise<void>>();
  /** Nodes whose waits are open. */
  private readonly open: Set<string>;
  /** This pass's records: the trigger step first on a first pass, then node steps in finishing order. */
  private readonly steps: Step[] = [];
  private readonly cogs: Cost[] = [];
  /** The node steps of earlier passes and of waits that ended (for the final status). */
  private readonly earlierSteps: StepSummary[];
  /** onStep calls, one after another in recording order. */
  private notified: Promise<void> = Promise.resolve();
  private ending: Ending | undefined;

  constructor(
    private readonly input: RunInput,
    limits: Config["limits"],
    private readonly now: () => number,
  ) {
    const restored = (this.restored = input.resume?.snapshot);
    this.nodes = new Map(input.definition.nodes.map((n) => [n.id, n]));
    this.position = new Map(input.definition.nodes.map((n, i) => [n.id, i]));
    this.sandbox = new SandboxSession(input.context.owner, {
      budgetMs: limits.sandboxTimePerExecutionMs,
      ...(input.signal ? { signal: input.signal } : {}),
      ...(restored ? { spentMs: restored.spent.sandboxMs } : {}),
    });
    this.settled = new Map(Object.entries(restored?.settled ?? {}));
    this.outputs = new Map(Object.entries(restored?.outputs ?? {}).map(([id, text]) => [id, new JsonText(text)]));
    this.budget = new ExecutionBudget(limits, restored?.spent);
    this.choices = new Map(Object.entries(restored?.choices ?? {}));
    this.open = new Set(restored?.open ?? []);
    this.earlierSteps = [...(restored?.steps ?? [])];
  }

  get resumed(): boolean {
    return this.restored !== undefined;
  }

  /** Records a finished step (and its gas cost) and hands it to onStep after the steps before it; `final`: none can follow. */
  record(step: Step, cost?: Cost, final = false): Promise<void> {
    const { onStep } = this.input;
    this.steps.push(step);
    if (cost) this.cogs.push(cost);
    if (onStep) this.notified = this.notified.then(() => onStep(step, { final }));
    return this.notified;
  }

  /** Resolves once every onStep call made so far has returned. */
  delivered(): Promise<void> {
    return this.notified;
  }

  // ---- Deciding: a node is decided once every source of its incoming edges has settled.

  /**
   * The nodes ready to start, in graph order: every node whose sources have settled is decided as it is reached,
   * skipped (settled at once) when no incoming edge is active or a source failed, else yielded to be started. Sweeps
   * again while one skipped a node, until the run stops or fails.
   */
  *nextReady(): Generator<Node> {
    let skipped = true;
    while (skipped && !this.halted) {
      skipped = false;
      for (const id of this.input.graph.order) {
        const decision = this.decide(id);
        if (decision === "skip") {
          this.settled.set(id, "skipped");
          skipped = true;
        } else if (decision === "run") yield this.nodes.get(id)!;
      }
    }
  }

  private decide(id: string): "run" | "skip" | undefined {
    if (this.settled.has(id) || this.running.has(id) || this.open.has(id)) return undefined;
    const incoming = this.input.graph.incoming.get(id) ?? [];
    if (!incoming.every((e) => this.hasSettled(e.source))) return undefined;
    const failedSource = incoming.some((e) => this.settled.get(e.source) === "failed");
    return incoming.some((e) => this.isActive(e)) && !failedSource ? "run" : "skip";
  }

  /** Active: its source is the trigger, a node that succeeded, or the branch condition that was chosen. */
  private isActive(edge: { source: string; condition?: string }): boolean {
    if (edge.source === this.input.graph.triggerId) return true;
    return (
      this.settled.get(edge.source) === "succeeded" && (edge.condition === undefined || this.choices.get(edge.source) === edge.condition)
    );
  }

  private hasSettled(id: string): boolean {
    return id === this.input.graph.triggerId || this.settled.has(id);
  }

  // ---- Steps in flight and how they settle.

  /** Tracks a started step until its task (which never rejects) has finished. */
  track(nodeId: string, task: Promise<void>): void {
    const tracked = task.finally(() => this.running.delete(nodeId));
    this.running.set(nodeId, tracked);
  }

  get busy(): boolean {
    return this.running.size > 0;
  }

  /** Resolves when one step in flight has finished (and is no longer tracked). */
  oneSettlement(): Promise<void> {
    return Promise.race(this.running.values());
  }

  /** The outputs of a node's ancestors that ran, by node name. */
  ancestorOutputs(nodeId: string): [string, JsonText][] {
    return [...(this.input.graph.ancestors.get(nodeId) ?? [])].flatMap((id): [string, JsonText][] => {
      const output = this.outputs.get(id);
      return output ? [[this.nodes.get(id)!.name, output]] : [];
    });
  }

  /** A node that finished: its output (JSON text, kept whole) and how it ended. */
  settle(nodeId: string, outputText: string, ok: boolean): void {
    this.outputs.set(nodeId, new JsonText(outputText));
    this.settled.set(nodeId, ok ? "succeeded" : "failed");
  }

  /** A branch's chosen condition (null: none matched). */
  choose(nodeId: string, choice: string | null): void {
    this.choices.set(nodeId, choice);
  }

  /** True when nothing else runs and every node is decided (an open wait is not): the step settling now is the last. */
  isLast(): boolean {
    return this.running.size === 1 && this.input.graph.order.every((id) => this.settled.has(id));
  }

  // ---- Waits (API.md §17.1).

  /** A node that suspended: it stays open (not settled), so nothing downstream of it is decided. */
  suspend(nodeId: string): void {
    this.open.add(nodeId);
  }

  /** No step runs and waits are open: the run may suspend (or take the waits that ended meanwhile). */
  get waiting(): boolean {
    return !this.busy && this.open.size > 0 && !this.halted;
  }

  /** A wait that ended: its step is recorded by whatever ended it; the run takes its outcome as a finished node's. */
  applyEnded(ended: EndedWait): void {
    if (!this.open.delete(ended.nodeId)) return;
    const text = stringify(ended.output);
    this.budget.keep(Buffer.byteLength(text));
    this.settle(ended.nodeId, text, ended.success);
    this.earlierSteps.push({ id: ended.nodeId, name: this.nodes.get(ended.nodeId)!.name, startAt: ended.startAt, success: ended.success });
  }

  snapshot(): RunSnapshot {
    const { triggerOutput, triggerInput } = this.input;
    return {
      trigger: this.restored?.trigger ?? { output: triggerOutput, ...(triggerInput ? { input: triggerInput } : {}) },
      settled: Object.fromEntries(this.settled),
      choices: Object.fromEntries(this.choices),
      outputs: Object.fromEntries([...this.outputs].map(([id, json]) => [id, json.text])),
      open: [...this.open],
      steps: [...this.earlierSteps, ...this.nodeSteps().map(summary)],
      spent: { ...this.budget.spent(), sandboxMs: this.sandbox.usedMs },
    };
  }

  // ---- How the run ends.

  /** Stopped or failed inside the engine: no node starts any more. */
  get halted(): boolean {
    return this.ending?.kind === "stopped" || this.ending?.kind === "failed";
  }

  /** Checks `signal`, `deadline` and `shouldStop`; true (the run stopped) when one says stop. */
  async checkStop(): Promise<boolean> {
    const { signal, deadline, shouldStop } = this.input;
    let reason: string | undefined;
    if (signal?.aborted || (deadline !== undefined && this.now() > deadline)) reason = this.input.deadlineReason ?? DEFAULT_DEADLINE_REASON;
    else if (shouldStop && (await shouldStop())) reason = this.input.stopReason ?? DEFAULT_STOP_REASON;
    if (reason !== undefined) this.end({ kind: "stopped", reason });
    return reason !== undefined;
  }

  /** The wait host's answer when the run was quiet (or a stop): the run ends so, unless it has failed already. */
  end(ending: Exclude<Ending, { kind: "failed" }>): void {
    if (this.ending?.kind !== "failed") this.ending = ending;
  }

  /** An unexpected failure (the first one counts); a node it interrupted counts as failed. */
  fail(error: unknown, nodeId?: string): void {
    if (this.ending?.kind !== "failed") this.ending = { kind: "failed", error };
    if (nodeId !== undefined && !this.settled.has(nodeId)) this.settled.set(nodeId, "failed");
  }

  /** The unexpected failure, if any, once the steps in flight and onStep calls have finished. */
  async failure(): Promise<{ error: unknown } | undefined> {
    if (this.ending?.kind !== "failed") return undefined;
    await Promise.allSettled([...this.running.values(), this.notified]);
    return { error: this.ending.error };
  }

  /** The run's result: its status, and the steps it recorded in start order (the trigger step first) with their costs. */
  finish(): RunResult {
    const triggerStep = this.restored ? undefined : this.steps[0];
    const nodeSteps = this.nodeSteps().sort((a, b) => this.byStart(a, b));
    const steps = triggerStep ? [triggerStep, ...nodeSteps] : nodeSteps;
    const order = new Map(steps.map((s, i) => [s.id, i]));
    this.cogs.sort((a, b) => order.get(a.nodeId)! - order.get(b.nodeId)!);
    const { status, error } = this.status(nodeSteps);
    return { status, ...(error !== undefined ? { error } : {}), steps, cogs: this.cogs, endAt: this.now() };
  }

  private status(nodeSteps: Step[]): { status: RunResult["status"]; error?: string } {
    const { ending } = this;
    if (ending?.kind === "failed") return { status: "error", error: INTERNAL_ERROR };
    if (ending?.kind === "stopped") return { status: "error", error: ending.reason };
    if (this.input.signal?.aborted) return { status: "error", error: this.input.deadlineReason ?? DEFAULT_DEADLINE_REASON };
    if (ending?.kind === "suspended") return { status: "waiting" };
    const all = [...this.earlierSteps, ...nodeSteps.map(summary)].sort((a, b) => this.byStart(a, b));
    const failed = all.filter((s) => !s.success);
    if (failed.length)
      return { status: "failed", error: `${failed.length} of ${all.length} steps failed: ${failed.map((s) => s.name).join(", ")}` };
    return { status: "success" };
  }

  /** This pass's node steps (after the trigger step on a first pass), in recording order. */
  private nodeSteps(): Step[] {
    return this.steps.slice(this.restored ? 0 : 1);
  }

  private byStart(a: StepSummary, b: StepSummary): number {
    return a.startAt - b.startAt || this.position.get(a.id)! - this.position.get(b.id)!;
  }
}
