/**
 * The items of an execution beside its record, in the `EXEC#<id>` partition (pattern 13b, 13c): a recorded step's
 * JSON in parts (`STEP#<stepId>#<part>`, step items v 2), a large step output in parts of its own
 * (`OUT#<stepId>#<part>`), and a run input too large for the execution item (`INPUT#<part>`). Parts are binary,
 * far below DynamoDB's item limit; a step's parts are written in the transaction that records it
 * (./execution.ts recordStepItems).
 */
import { defineEntity } from "../entity";
import { Keys } from "../item-keys";

/** A part of a recorded step's JSON, or of its output's (`STEP#…` / `OUT#…`). */
export interface StepPart {
  stepId: string;
  part: number;
  parts: number;
  body: Uint8Array;
  /** Step items v 2, on every part of a step (not of an output). */
  outputBytes?: number;
  outputParts?: number;
}

/** A part of a run input or of a sealed state. */
interface BodyPart {
  part: number;
  parts: number;
  body: Uint8Array;
  expiresAt: number;
}

type StepPartId = { id: string; stepId: string; part: number };

const ExecutionStep = defineEntity<StepPart, StepPartId>({
  type: "executionStep",
  version: 2,
  key: ({ id, stepId, part }) => Keys.executionStep(id, stepId, part),
});

const ExecutionStepOutput = defineEntity<StepPart, StepPartId>({
  type: "executionStepOutput",
  version: 2,
  key: ({ id, stepId, part }) => Keys.executionStepOutput(id, stepId, part),
});

const ExecutionInput = defineEntity<BodyPart, { id: string; part: number }>({
  type: "executionInput",
  version: 1,
  key: ({ id, part }) => Keys.executionInput(id, part),
});

/** A step's JSON (`body`) and, when it lies in items of its own, its output's JSON (`output`), cut in `partBytes`. */
export interface StepRecording {
  stepId: string;
  body: Buffer;
  /** The serialized output's bytes (whether or not it is inside `body`). */
  outputBytes: number;
  /** The output's JSON when it is not inside `body`. */
  output?: Buffer;
  partBytes: number;
}

/** The transaction items that write a step's parts and its output's parts. */
export function stepPartItems(executionId: string, r: StepRecording) {
  const { steps, outputs } = partsOf(executionId, r);
  return [...steps.map((p) => ExecutionStep.tx.put(p.id, p.item)), ...outputs.map((p) => ExecutionStepOutput.tx.put(p.id, p.item))];
}

/** The same items as `stepPartItems`, each by a PutItem of its own (in parallel). */
export async function putStepParts(executionId: string, r: StepRecording): Promise<void> {
  const { steps, outputs } = partsOf(executionId, r);
  await Promise.all([...steps.map((p) => ExecutionStep.put(p.id, p.item)), ...outputs.map((p) => ExecutionStepOutput.put(p.id, p.item))]);
}

function partsOf(executionId: string, r: StepRecording) {
  const parts = Math.max(1, Math.ceil(r.body.length / r.partBytes));
  const outputParts = r.output ? Math.ceil(r.output.length / r.partBytes) : 0;
  const slice = (bytes: Buffer, part: number) => bytes.subarray(part * r.partBytes, (part + 1) * r.partBytes);
  return {
    steps: Array.from({ length: parts }, (_, part) => ({
      id: { id: executionId, stepId: r.stepId, part },
      item: { stepId: r.stepId, part, parts, outputBytes: r.outputBytes, outputParts, body: slice(r.body, part) },
    })),
    outputs: Array.from({ length: outputParts }, (_, part) => ({
      id: { id: executionId, stepId: r.stepId, part },
      item: { stepId: r.stepId, part, parts: outputParts, body: slice(r.output!, part) },
    })),
  };
}

/** Every step part of an execution (strongly consistent Query, one page per MB). */
export async function* stepPartPages(executionId: string): AsyncGenerator<StepPart[]> {
  const query = { pk: Keys.executionStep(executionId, "", 0).pk, sk: { beginsWith: "STEP#" }, consistent: true };
  for await (const page of ExecutionStep.pages(query)) yield page.items;
}

/**
 * The output parts of `steps` (strongly consistent BatchGetItem, 100 keys a request; unprocessed keys read again
 * after a growing pause, giving up after 8 retries).
 */
export async function readOutputParts(executionId: string, steps: { stepId: string; parts: number }[]): Promise<StepPart[]> {
  const keys = steps.flatMap((s) =>
    Array.from({ length: s.parts }, (_, part) => ExecutionStepOutput.key({ id: executionId, stepId: s.stepId, part })),
  );
  const items: StepPart[] = [];
  for (let i = 0; i < keys.length; i += 100) {
    let request = keys.slice(i, i + 100);
    for (let attempt = 0; request.length; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt)));
      if (attempt > 8) throw new Error("reading step outputs: keys left unprocessed");
      const out = await ExecutionStepOutput.batchGet(request, { consistent: true });
      items.push(...out.items);
      request = out.unprocessed;
    }
  }
  return items;
}

/** Writes a run input's parts (one PutItem each, in order), expiring at `expiresAt` (s). */
export async function writeInputParts(executionId: string, bytes: Buffer, partBytes: number, expiresAt: number): Promise<number> {
  const parts = Math.ceil(bytes.length / partBytes);
  for (let part = 0; part < parts; part++) {
    const body = bytes.subarray(part * partBytes, (part + 1) * partBytes);
    await ExecutionInput.put({ id: executionId, part }, { part, parts, body, expiresAt });
  }
  return parts;
}

/** Deletes a run input's parts (one DeleteItem each, in order). */
export async function deleteInputParts(executionId: string, parts: number): Promise<void> {
  for (let part = 0; part < parts; part++) await ExecutionInput.delete({ id: executionId, part });
}

/** A run input's parts joined (strongly consistent GetItems in parallel); throws when one is missing. */
export async function readInputParts(executionId: string, parts: number): Promise<Buffer> {
  const chunks = await Promise.all(
    Array.from({ length: parts }, async (_, part) => {
      const item = await ExecutionInput.get({ id: executionId, part }, { consistent: true });
      if (!item) throw new Error(`part ${part} of the run input of ${executionId} is missing`);
      return item.body;
    }),
  );
  return Buffer.concat(chunks);
}

const ExecutionState = defineEntity<BodyPart, { id: string; generation: number; part: number }>({
  type: "executionState",
  version: 1,
  key: ({ id, generation, part }) => Keys.executionState(id, generation, part),
});

/** Writes a waiting run's sealed state (pattern 13d) in parts of `partBytes`, expiring at `expiresAt` (s); its part count. */
export async function writeStateParts(
  executionId: string,
  generation: number,
  bytes: Buffer,
  partBytes: number,
  expiresAt: number,
): Promise<number> {
  const parts = Math.max(1, Math.ceil(bytes.length / partBytes));
  const all = Array.from({ length: parts }, (_, part) => part);
  // A few at a time: a 32 MiB state is about a hundred items.
  for (let i = 0; i < parts; i += 8) {
    await Promise.all(
      all
        .slice(i, i + 8)
        .map((part) =>
          ExecutionState.put(
            { id: executionId, generation, part },
            { part, parts, body: bytes.subarray(part * partBytes, (part + 1) * partBytes), expiresAt },
          ),
        ),
    );
  }
  return parts;
}

/** A waiting run's state, its parts joined (strongly consistent reads); throws when one is missing. */
export async function readStateParts(executionId: string, generation: number, parts: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < parts; i += 8) {
    const read = await Promise.all(
      Array.from({ length: Math.min(8, parts - i) }, async (_, k) => {
        const item = await ExecutionState.get({ id: executionId, generation, part: i + k }, { consistent: true });
        if (!item) throw new Error(`part ${i + k} of state ${generation} of ${executionId} is missing`);
        return item.body;
      }),
    );
    chunks.push(...read);
  }
  return Buffer.concat(chunks);
}

/** Deletes a state generation's parts (best effort is the caller's: they also expire). */
export async function deleteStateParts(executionId: string, generation: number, parts: number): Promise<void> {
  for (let i = 0; i < parts; i += 8) {
    await Promise.all(
      Array.from({ length: Math.min(8, parts - i) }, (_, k) => ExecutionState.delete({ id: executionId, generation, part: i + k })),
    );
  }
}
