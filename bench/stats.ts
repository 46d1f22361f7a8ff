/**
 * What every bench measures with: the 50th/99th percentiles of a side's times, timed rounds run side by side, and
 * the first cells of a report row (operation, its percentiles, the baseline, its percentiles).
 */

export interface Stat {
  p50: number;
  p99: number;
}

/** The 50th and 99th percentiles of `times`. */
export function stat(times: number[]): Stat {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  return { p50: at(50), p99: at(99) };
}

/** A round that reports its own timed part in ms (so untimed setup can precede it). */
export type Round = (i: number) => Promise<number>;

/** A round timing all of `fn`. */
export const timed =
  (fn: () => Promise<void>): Round =>
  async () => {
    const start = performance.now();
    await fn();
    return performance.now() - start;
  };

/** bench/run.ts's measure for several sides at once: warm-up rounds, then each round runs every side in turn. */
export async function interleaved<T extends Round[]>(rounds: number, sides: [...T]): Promise<{ [K in keyof T]: Stat }> {
  for (let i = 0; i < Math.min(5, rounds); i++) for (const side of sides) await side(-1 - i);
  const times = sides.map((): number[] => []);
  for (let i = 0; i < rounds; i++) for (const [n, side] of sides.entries()) times[n]!.push(await side(i));
  return times.map(stat) as { [K in keyof T]: Stat };
}

/** A report row's first cells: the operation and its p50/p99 in ms, the baseline and its p50/p99 in ms. */
export const statCells = (name: string, s: Stat, baselineName: string, b: Stat): string[] => [
  name,
  s.p50.toFixed(2),
  s.p99.toFixed(2),
  baselineName,
  b.p50.toFixed(2),
  b.p99.toFixed(2),
];
