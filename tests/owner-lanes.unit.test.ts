/**
 * Per-owner lanes (shared/owner-lanes.ts): at most `width` pieces of one owner's work at once, the rest first come,
 * first served; another owner's work never waits behind them; work withdrawn by its signal leaves the queue.
 */
import { describe, expect, it } from "vitest";
import { OwnerLanes } from "../shared/owner-lanes";

/** A piece of work that runs until `finish()`; `started` says whether it began. */
function gate() {
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => (finish = resolve));
  const piece = { started: false, finish: () => finish(), work: () => ((piece.started = true), done) };
  return piece;
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("owner lanes", () => {
  it("runs at most `width` of one owner's work at once, the rest in order; another owner is not held up", async () => {
    const lanes = new OwnerLanes(2);
    const pieces = Array.from({ length: 5 }, gate);
    const runs = pieces.map((p) => lanes.run("0xA", p.work));
    await tick();
    expect(pieces.map((p) => p.started)).toEqual([true, true, false, false, false]);

    const other = gate();
    const theirs = lanes.run("0xb", other.work);
    await tick();
    expect(other.started).toBe(true);

    pieces[1]!.finish();
    await tick();
    expect(pieces.map((p) => p.started)).toEqual([true, true, true, false, false]);
    // The owner is the same whatever the letter case.
    const upper = gate();
    void lanes.run("0xa", upper.work);
    for (const p of pieces) p.finish();
    await Promise.all(runs);
    await tick();
    expect(upper.started).toBe(true);
    upper.finish();
    other.finish();
    await theirs;
  });

  it("work whose signal aborts while it waits leaves the queue without running; the next one takes its turn", async () => {
    const lanes = new OwnerLanes(1);
    const first = gate();
    const withdrawn = gate();
    const next = gate();
    const running = lanes.run("0xa", first.work);
    const controller = new AbortController();
    const leaving = lanes.run("0xa", withdrawn.work, controller.signal);
    const waiting = lanes.run("0xa", next.work);
    controller.abort(new Error("client went away"));
    await expect(leaving).rejects.toThrow("client went away");
    first.finish();
    await running;
    await tick();
    expect(withdrawn.started).toBe(false);
    expect(next.started).toBe(true);
    next.finish();
    await waiting;
    // Already aborted: refused at once when it would have to wait.
    const busy = gate();
    const holding = lanes.run("0xa", busy.work);
    await expect(lanes.run("0xa", async () => {}, AbortSignal.abort(new Error("gone")))).rejects.toThrow("gone");
    busy.finish();
    await holding;
  });
});
