/**
 * Operators' counts as CloudWatch Embedded Metric Format lines (shared/metrics.ts), and log lines tagged with the
 * Lambda invocation that wrote them (shared/log.ts).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { countMetric, emitMetrics, gaugeMetric } from "../shared/metrics";
import { inInvocation, log, setLogLevel } from "../shared/log";

function written(stream: NodeJS.WriteStream, work: () => void): Record<string, unknown>[] {
  const lines: string[] = [];
  const spy = vi.spyOn(stream, "write").mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
  try {
    work();
  } finally {
    spy.mockRestore();
  }
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>);
}

afterEach(() => emitMetrics(undefined));

describe("countMetric", () => {
  it("writes nothing until the host names a namespace (npm start, tests)", () => {
    expect(written(process.stdout, () => countMetric("Executions", { Status: "success" }))).toEqual([]);
  });

  it("writes one EMF line: the namespace, stage-wide and by its dimensions, the metric as a Count of 1", () => {
    emitMetrics("workflow-automation/prod");
    const [line] = written(process.stdout, () => countMetric("ClaimsRefused", { Reason: "DISABLED" }));
    expect(line).toMatchObject({
      _aws: {
        CloudWatchMetrics: [
          { Namespace: "workflow-automation/prod", Dimensions: [[], ["Reason"]], Metrics: [{ Name: "ClaimsRefused", Unit: "Count" }] },
        ],
      },
      Reason: "DISABLED",
      ClaimsRefused: 1,
    });
    expect(typeof (line!._aws as { Timestamp: unknown }).Timestamp).toBe("number");
  });
});

describe("gaugeMetric", () => {
  it("writes the value measured, without a unit", () => {
    emitMetrics("ns");
    const [line] = written(process.stdout, () => gaugeMetric("WatcherLagBlocks", 42, { ChainId: "11155111" }));
    expect(line).toMatchObject({
      _aws: { CloudWatchMetrics: [{ Dimensions: [[], ["ChainId"]], Metrics: [{ Name: "WatcherLagBlocks", Unit: "None" }] }] },
      ChainId: "11155111",
      WatcherLagBlocks: 42,
    });
  });
});

describe("inInvocation", () => {
  it("tags every line written inside it, after awaits too, with the invocation's awsRequestId, and none outside", async () => {
    setLogLevel("info");
    const lines: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
    try {
      await inInvocation("req-1", async () => {
        log.info("before");
        await new Promise((r) => setTimeout(r, 1));
        log.info("after", { awsRequestId: "a field of the caller wins" });
      });
      log.info("outside");
      inInvocation(undefined, () => log.info("no id"));
    } finally {
      spy.mockRestore();
      setLogLevel("error");
    }
    const parsed = lines.map((l) => JSON.parse(l) as { message: string; awsRequestId?: string });
    expect(parsed.map((p) => [p.message, p.awsRequestId])).toEqual([
      ["before", "req-1"],
      ["after", "a field of the caller wins"],
      ["outside", undefined],
      ["no id", undefined],
    ]);
  });
});
