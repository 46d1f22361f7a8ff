/**
 * LOCAL_CHAIN_IDS and LOCAL_TOKENS (API.md §21.4): what each accepts and refuses, and which tokens a chain id gets.
 * `npm start` with them: tests/local/start-chains.test.ts.
 */
import { describe, expect, it } from "vitest";
import { localChainSettings } from "../../local/devnet/settings";
import { localTokens } from "../../local/devnet/tokens";

describe("localChainSettings", () => {
  it("defaults to chain 31337 with tokens planted", () => {
    expect(localChainSettings({})).toEqual({ chainIds: [31337], tokens: true });
    expect(localChainSettings({ LOCAL_CHAIN_IDS: "", LOCAL_TOKENS: "" })).toEqual({ chainIds: [31337], tokens: true });
  });

  it("reads comma-separated chain ids in order, spaces allowed, and LOCAL_TOKENS on or off", () => {
    expect(localChainSettings({ LOCAL_CHAIN_IDS: "11155111, 31337", LOCAL_TOKENS: "0" })).toEqual({
      chainIds: [11155111, 31337],
      tokens: false,
    });
    expect(localChainSettings({ LOCAL_TOKENS: "FALSE" }).tokens).toBe(false);
    expect(localChainSettings({ LOCAL_TOKENS: "1" }).tokens).toBe(true);
    expect(localChainSettings({ LOCAL_TOKENS: "true" }).tokens).toBe(true);
  });

  it.each([
    ["31337,", "each chain id must be an integer from 1 to 4503599627370476"],
    ["sepolia", "each chain id must be an integer from 1 to 4503599627370476"],
    ["0", "each chain id must be an integer from 1 to 4503599627370476"],
    ["-1", "each chain id must be an integer from 1 to 4503599627370476"],
    ["1.5", "each chain id must be an integer from 1 to 4503599627370476"],
    ["4503599627370477", "each chain id must be an integer from 1 to 4503599627370476"],
    ["31337,11155111,31337", "a chain id may appear only once"],
    ["1,2,3,4,5,6,7,8,9", "at most 8 chains"],
  ])("refuses LOCAL_CHAIN_IDS=%s", (value, message) => {
    expect(() => localChainSettings({ LOCAL_CHAIN_IDS: value })).toThrow(
      `Invalid configuration:\n  LOCAL_CHAIN_IDS: ${message} (got "${value}")`,
    );
  });

  it("refuses a LOCAL_TOKENS that is not 1, true, 0 or false", () => {
    expect(() => localChainSettings({ LOCAL_TOKENS: "yes" })).toThrow('LOCAL_TOKENS: must be 1, true, 0 or false (got "yes")');
  });
});

describe("planted tokens", () => {
  it("Sepolia gets USDC and WETH at their public addresses with their public metadata; 31337 the same set", () => {
    expect(localTokens(11155111)).toEqual(
      expect.arrayContaining([
        { symbol: "USDC", name: "USDC", decimals: 6, address: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238" },
        { symbol: "WETH", name: "Wrapped Ether", decimals: 18, address: "0xfFf9976782d46CC05630D1f6eBAb18b2324d6B14" },
      ]),
    );
    expect(localTokens(31337)).toEqual(localTokens(11155111));
    expect(localTokens(424242)).toEqual([]);
  });
});
