/**
 * An execution's budgets of memory and outbound requests (API.md §18.2, §18.3).
 *
 * State: the step outputs the execution keeps for later templates are at most `max_execution_state_bytes`,
 * measured as serialized JSON. A step holds what it reads while it runs (a response body, a script's result,
 * its loop iterations) against the same budget, so nothing it builds can pass it; when the step ends, what it
 * held is given back and its output is kept in its place (or refused: OUTPUT_TOO_LARGE, output `{data: null}`).
 *
 * Requests: every restApi and graphqlQuery request, redirects and loop iterations included, counts one of
 * `max_http_requests_per_execution`; one more is refused before it is sent.
 */
import { OutboundError } from "../outbound/types";
import { StepFailure } from "../kinds/kind";

const MIB = 1_048_576;

/** What one running step holds against the state budget. */
export interface HeldState {
  hold(bytes: number): void;
  release(): void;
}

export class ExecutionBudget {
  private kept = 0;
  private held = 0;
  private requests = 0;

  constructor(
    private readonly limits: { maxExecutionStateBytes: number; maxHttpRequestsPerExecution: number },
    /** What earlier passes of the run used (a run resumed after a wait, API.md §17.1.2). */
    spent: { keptBytes: number; requests: number } = { keptBytes: 0, requests: 0 },
  ) {
    this.kept = spent.keptBytes;
    this.requests = spent.requests;
  }

  /** What the run has used so far, for the next pass. */
  spent(): { keptBytes: number; requests: number } {
    return { keptBytes: this.kept, requests: this.requests };
  }

  /** A step's account: what it holds while it runs. */
  step(): HeldState {
    let mine = 0;
    return {
      hold: (bytes) => {
        if (this.kept + this.held + bytes > this.limits.maxExecutionStateBytes) throw this.outputTooLarge();
        this.held += bytes;
        mine += bytes;
      },
      release: () => {
        this.held -= mine;
        mine = 0;
      },
    };
  }

  /** Keeps a finished step's output of `bytes`; false (nothing kept) when it would pass the budget. */
  keep(bytes: number): boolean {
    if (this.kept + this.held + bytes > this.limits.maxExecutionStateBytes) return false;
    this.kept += bytes;
    return true;
  }

  outputTooLarge(): StepFailure {
    return new StepFailure("OUTPUT_TOO_LARGE", `execution state would exceed ${formatBytes(this.limits.maxExecutionStateBytes)}`);
  }

  takeRequest(): void {
    const limit = this.limits.maxHttpRequestsPerExecution;
    if (this.requests >= limit) throw new OutboundError("HTTP_BUDGET_EXCEEDED", `execution reached its limit of ${limit} HTTP requests`);
    this.requests++;
  }
}

const formatBytes = (bytes: number) => (bytes % MIB === 0 ? `${bytes / MIB} MiB` : `${bytes} bytes`);
