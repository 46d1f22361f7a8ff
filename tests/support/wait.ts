/**
 * Waiting on a state instead of for a fixed time: `waitFor` polls `condition` every `intervalMs` and returns as
 * soon as it holds, failing with `what` after `timeoutMs`.
 */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  { timeoutMs = 20_000, intervalMs = 50 } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Whether a child process has exited (by itself or by a signal). */
export const exited = (child: { exitCode: number | null; signalCode: string | null }) =>
  child.exitCode !== null || child.signalCode !== null;
