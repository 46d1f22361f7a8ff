/** What a chain's watch reads of the chain besides logs: block headers and receipts (each read once), a log's output. */
import { getAddress, type Hex, type PublicClient } from "viem";
import { blockStepOutput } from "../execution/trigger-output";
import { methodResults } from "./fire";
import type { Decoded, Log, RpcLog } from "./match";
import { Lru, type Header } from "./pass-state";
import type { EventQuery } from "../kinds/support/event-query";

export class ChainReader {
  /** The chain's client, set by each pass. */
  client!: PublicClient;
  private readonly headers = new Lru<number, Promise<Header>>(1024);
  /** Transaction hash → its receipt's first log index and log count. */
  private readonly receipts = new Lru<string, Promise<{ first: number; count: number }>>(4096);

  constructor(private readonly chainId: number) {}

  header(n: number): Promise<Header> {
    let found = this.headers.get(n);
    if (!found) {
      found = this.client
        .getBlock({ blockNumber: BigInt(n) })
        .then((b) => ({ number: n, timestampMs: Number(b.timestamp) * 1000, output: blockStepOutput(b) }));
      found.catch(() => this.headers.delete(n));
      this.headers.set(n, found);
    }
    return found;
  }

  /** The log's position inside its transaction (from the receipt, read once per transaction). */
  async positionInTransaction(raw: RpcLog, logIndex: number): Promise<number> {
    let known = this.receipts.get(raw.transactionHash);
    if (!known) {
      known = (
        this.client.request({ method: "eth_getTransactionReceipt", params: [raw.transactionHash] } as never) as Promise<{
          logs: { logIndex: Hex }[];
        } | null>
      ).then((r) => {
        const logs = r?.logs ?? [];
        return { first: logs.length > 0 ? parseInt(logs[0]!.logIndex, 16) : 0, count: logs.length };
      });
      known.catch(() => this.receipts.delete(raw.transactionHash));
      this.receipts.set(raw.transactionHash, known);
    }
    const { first, count } = await known;
    const at = logIndex - first;
    if (at < 0 || at >= count) throw new Error(`log ${raw.logIndex} of ${raw.transactionHash} is not in its receipt`);
    return at;
  }

  /** The output an event trigger's fire carries for a log (§8.3.6). */
  async eventOutput(raw: RpcLog, entryLog: Log, query: EventQuery, decoded: Decoded): Promise<Record<string, unknown>> {
    const data: Record<string, unknown> = {
      address: getAddress(raw.address),
      blockNumber: entryLog.block,
      blockHash: raw.blockHash,
      transactionHash: raw.transactionHash,
      transactionIndex: parseInt(raw.transactionIndex, 16),
      logIndex: entryLog.index,
      topics: raw.topics,
      data: raw.data,
      timestamp: (await this.header(entryLog.block)).timestampMs,
    };
    if (decoded.eventName !== undefined) Object.assign(data, { eventName: decoded.eventName, args: decoded.args });
    if (query.methodCalls?.length) data.methodResults = await methodResults(this.chainId, query, getAddress(raw.address));
    return { data };
  }
}
