/**
 * What an answer's body costs where it is sent (API.md §18.2: the record and page budgets "hold the answers under
 * the Lambda and API Gateway response limits"). Behind a Node server the body goes out as it is. On Lambda the
 * handler returns an envelope `{statusCode, headers, body, isBase64Encoded}` that the runtime serializes with
 * `JSON.stringify`, so the body (JSON text) is escaped once more, and Lambda refuses an envelope above 6 MB
 * (API Gateway then answers 500): a page of small objects full of quotes grows from 4.94 MiB to 6.67 MiB.
 *
 * JSON text as `JSON.stringify` writes it has no control characters and no lone surrogates, so escaping it again
 * adds exactly one byte per `"` and per `\`: at most twice its size. Budgets count that growth on Lambda, which
 * keeps every answer's envelope within the limit without compressing (a client that sends no Accept-Encoding,
 * curl's default, is served too), and leaves the answers of the Node server as they are.
 */

/** Lambda's limit on a synchronous invocation's response: the serialized envelope, headers included. */
const LAMBDA_RESPONSE_LIMIT = 6_291_456;
/** Room left in the envelope for the status, the headers and the envelope's own members. */
const ENVELOPE_HEADROOM = 65_536;
/** The most an answer's body may take in a Lambda envelope (escaped). */
export const LAMBDA_BODY_BUDGET = LAMBDA_RESPONSE_LIMIT - ENVELOPE_HEADROOM;

export type AnswerEnvelope = "none" | "lambda";
let envelope: AnswerEnvelope = "none";

/** Set once by the host: wireAws (shared/service/wire-aws.ts) installs "lambda". */
export function setAnswerEnvelope(kind: AnswerEnvelope): void {
  envelope = kind;
}

export const answersInLambdaEnvelope = () => envelope === "lambda";

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The bytes `json` (JSON text) takes as an answer's body here: its UTF-8 bytes, escaped once more on Lambda. */
export function answerBytes(json: string): number {
  const bytes = Buffer.byteLength(json);
  if (envelope === "none") return bytes;
  let escapes = 0;
  for (let i = 0; i < json.length; i += 1) {
    const c = json.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH) escapes += 1;
  }
  return bytes + escapes;
}
