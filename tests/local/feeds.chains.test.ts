/**
 * Price feeds planted at their public addresses (local/devnet/feeds.ts, API.md §21.4), on the `chains` project's
 * stack (LOCAL_CHAIN_IDS=31337,11155111, well-known contracts planted): Sepolia's Chainlink ETH/USD feed answers a
 * contractRead through the real server as the public one does (latestRoundData, decimals 8, "ETH / USD",
 * latestAnswer, version), `setAnswer` starts a round that `POST /triggers:run` finds as an `AnswerUpdated` log with
 * its condition applied, and planting again (a restart) keeps the rounds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getAddress, parseAbi, parseEventLogs } from "viem";
import { startService, type TestService } from "../support/service";
import { jsonClient, type Json } from "../support/client";
import { signIn } from "../support/auth";
import { httpTarget } from "../support/server";
import { devnet, fundedAccount } from "../support/chain";
import { FEED_KEEPER, localFeeds, localPriceFeedAbi, plantFeeds } from "../../local/devnet/feeds";

const SEPOLIA = 11155111;
const ETH_USD = "0x694AA1769357215DE4FAC081bf1f309aDC325306";
const ANSWER_UPDATED = "0x0559884fd3a460db3073b7fc896cc77986f16e378210ded43186175bf646fc5f";

/** The reference client's oracle ABI: Chainlink's AggregatorV3 subset plus description, version and latestAnswer. */
const oracleAbi = parseAbi([
  "function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)",
  "function decimals() view returns (uint8)",
  "function description() view returns (string)",
  "function version() view returns (uint256)",
  "function latestAnswer() view returns (int256)",
]);
/** Chainlink's aggregator events, as the reference client's `answerUpdatedEventAbi` names AnswerUpdated. */
const feedEvents = parseAbi([
  "event NewRound(uint256 indexed roundId, address indexed startedBy, uint256 startedAt)",
  "event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt)",
]);

let service: TestService;
beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await service?.close();
});

const { call } = jsonClient(() => service.url);
const signedIn = () => signIn(httpTarget(service.url), { chainId: SEPOLIA, expiresInMs: 3600_000 });

/** `POST /triggers:run` of an event trigger on ETH/USD's AnswerUpdated logs whose `current` is over `above`. */
const latestUpdate = async (above: string) =>
  call(await signedIn(), "POST", "/triggers:run", {
    trigger: {
      id: "t",
      name: "ev",
      type: "event",
      config: {
        chainId: SEPOLIA,
        queries: [
          {
            addresses: [ETH_USD],
            topics: [ANSWER_UPDATED],
            contractAbi: [feedEvents[1]],
            conditions: [{ fieldName: "AnswerUpdated.current", operator: "gt", fieldType: "int256", value: above }],
          },
        ],
      },
    },
  });

describe("planted price feeds", () => {
  it("Sepolia's ETH/USD feed answers a contractRead through the server as Chainlink's does", async () => {
    const node = {
      id: "price",
      name: "price",
      type: "contractRead",
      config: {
        chainId: SEPOLIA,
        contractAddress: ETH_USD,
        contractAbi: oracleAbi,
        methodCalls: ["latestRoundData", "decimals", "description", "latestAnswer", "version"].map((methodName) => ({ methodName })),
      },
    };
    const res = await call(await signedIn(), "POST", "/nodes:run", { node });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.success, JSON.stringify(res.body)).toBe(true);
    const values = Object.fromEntries((res.body.output.data as Json[]).map((e) => [e.methodName, e.value]));
    const round = values.latestRoundData;
    expect(values).toMatchObject({ decimals: "8", description: "ETH / USD", latestAnswer: "300000000000", version: "4" });
    expect(round).toMatchObject({ answer: "300000000000", roundId: round.answeredInRound });
    expect(Number(round.updatedAt)).toBeGreaterThan(0);
    expect(round.startedAt).toBe(round.updatedAt);
    for (const element of res.body.output.data as Json[]) expect(element.contractAddress).toBe(getAddress(ETH_USD));
  });

  it("setAnswer starts a round, emitting AnswerUpdated and NewRound; triggers:run finds it, conditions applied", async () => {
    const client = devnet(SEPOLIA).client;
    const before = await client.readContract({ address: ETH_USD, abi: localPriceFeedAbi, functionName: "latestRound" });
    // The planting's first round is a log the trigger already finds.
    expect((await latestUpdate("0")).body).toMatchObject({ success: true, output: { data: { eventName: "AnswerUpdated" } } });

    const { wallet } = await fundedAccount(SEPOLIA);
    const hash = await wallet.writeContract({
      address: ETH_USD,
      abi: localPriceFeedAbi,
      functionName: "setAnswer",
      args: [312_345_000_000n],
    });
    const receipt = await client.waitForTransactionReceipt({ hash });
    const roundId = before + 1n;
    expect(parseEventLogs({ abi: feedEvents, logs: receipt.logs }).map((l) => l.eventName)).toEqual(["NewRound", "AnswerUpdated"]);
    const [, answer, , updatedAt] = await client.readContract({
      address: ETH_USD,
      abi: localPriceFeedAbi,
      functionName: "latestRoundData",
    });
    expect(answer).toBe(312_345_000_000n);

    const res = await latestUpdate("310000000000");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      success: true,
      output: {
        data: {
          address: getAddress(ETH_USD),
          eventName: "AnswerUpdated",
          args: { current: "312345000000", roundId: String(roundId), updatedAt: String(updatedAt) },
          transactionHash: hash,
        },
      },
    });
    // No round answered above 4000 USD: nothing matches.
    expect((await latestUpdate("400000000000")).body).toMatchObject({ success: false, errorCode: "NO_MATCH" });
  });

  it("planting again (a restart on a persisted chain) keeps the code and the rounds and sends nothing", async () => {
    const client = devnet(SEPOLIA).client;
    const read = () => client.readContract({ address: ETH_USD, abi: localPriceFeedAbi, functionName: "latestRoundData" });
    const sent = () => client.getTransactionCount({ address: FEED_KEEPER });
    const [round, code, keeperNonce] = [await read(), await client.getCode({ address: ETH_USD }), await sent()];
    expect(keeperNonce).toBe(localFeeds(SEPOLIA).length);
    expect(await plantFeeds(client, SEPOLIA)).toEqual(localFeeds(SEPOLIA));
    expect([await read(), await client.getCode({ address: ETH_USD }), await sent()]).toEqual([round, code, keeperNonce]);
  });

  it("31337 has Sepolia's feeds too, each answering its first round", async () => {
    const client = devnet(31337).client;
    for (const feed of localFeeds(31337)) {
      const [, answer] = await client.readContract({ address: feed.address, abi: localPriceFeedAbi, functionName: "latestRoundData" });
      expect(answer).toBe(BigInt(feed.initialAnswer));
    }
    expect(localFeeds(31337)).toEqual(localFeeds(SEPOLIA));
  });
});
