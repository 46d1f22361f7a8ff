/**
 * Executions (API.md §10): the record a run writes while it goes, the owner's reads of it, and the sweeper.
 *
 * Storage (shared/store/README.md patterns 13-15):
 * - The execution item (`WF#<wf>#EXEC` / `<id>`, GSI1 by owner, GSI2 while pending) holds the status, fees, costs
 *   and, when its JSON is small, the trigger step. It stays a few KB, so a status read (the stream's poll, the
 *   runner's shouldStop) costs 1-2 read units whatever the run recorded.
 * - Every other step is its own item(s) under `EXEC#<id>`: the step's JSON in parts of at most PART_BYTES, so
 *   no step can hit DynamoDB's 400 KB item limit (a step may carry a 256 KiB output, a 64 KiB log and a config of
 *   up to the 350 KiB workflow document). Steps are keyed by step id, so recording one twice is harmless.
 *   An output above INLINE_OUTPUT_BYTES lies in items of its own beside the step (step items v 2), with its size
 *   on the step's first part: an answer plans which outputs it keeps (API.md §18.2, `max_execution_record_bytes`)
 *   before it reads any, and never reads those it replaces. Step items v 1 hold the whole step and still read.
 * - Answers are bounded (API.md §18.2): one Execution to `max_execution_record_bytes` serialized, its largest
 *   outputs replaced with `{data: null, truncated: true, originalSize}` until it fits; a list page to
 *   `max_list_page_bytes`, assembled item by item in the order it keeps them and ended after the last that fits,
 *   so a list never reads the records of items it does not answer.
 *
 * The modules: execution-stored.ts (stored shapes, notification), execution-write.ts (the record's writes),
 * execution-read.ts (reads, assembly), execution-bounds.ts (step and answer bounds), execution-list.ts (lists,
 * count, stats), execution-sweep.ts (the sweeper). This file re-exports what callers use. Their reads and writes go
 * through the entities shared/store/entities/execution.ts (the execution item: keys, conditions, queries) and
 * execution-parts.ts (step, output and run-input parts).
 */

export { onChange, listenerCount } from "./execution-stored";
export { pendingItem, recordStep, finish, type Outcome } from "./execution-write";
export { sweep } from "./execution-sweep";
export { getRecord, readSummary, retrieve, statusOf } from "./execution-read";
export { list, count, stats } from "./execution-list";
