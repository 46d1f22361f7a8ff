/**
 * Turns for work cut in slices (a large body decoded or scanned, API.md §18: another owner's latency). Each
 * caller awaits `nextSlice()` between slices; one slice in all is let go per turn of the event loop, the callers
 * in arrival order, so a dozen large bodies at once add one slice, not a dozen, to the wait of a request that
 * arrives meanwhile (each `setImmediate` of their own would run them all in the same turn).
 */
const waiting: (() => void)[] = [];
let scheduled = false;

function letOneGo(): void {
  scheduled = false;
  waiting.shift()?.();
  if (waiting.length > 0) schedule();
}

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  setImmediate(letOneGo);
}

/** Resolves at this caller's turn: after I/O has had its phase, and after the slices queued before it. */
export function nextSlice(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    schedule();
  });
}
