/**
 * Open waits of `await` nodes (API.md §17.1): how a wait ends (a signal, a chain event, its deadline), each end
 * recorded once by one conditional transaction on the execution item, and the hand-over that resumes the run.
 */

/**
 * Ends the chain-event wait of `nodeId` with the output an event trigger would carry for the matching log
 * (`{data: {address, blockNumber, …}}`); false when the wait is no longer open (ended, timed out, execution gone).
 */
export async function endWaitByEvent(workflowId: string, executionId: string, nodeId: string, output: Record<string, unknown>): Promise<boolean> {
  void workflowId;
  void executionId;
  void nodeId;
  void output;
  throw new Error("not built yet");
}
