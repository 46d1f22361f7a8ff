/**
 * block (API.md §8.3.4): fires every `interval` blocks of its chain. Step output: the block
 * `{blockNumber, blockHash, timestamp, parentHash, difficulty, gasLimit, gasUsed}`. The frequency floor (§8.7
 * item 7) needs the chains' block times: shared/workflow/chain-rules.ts.
 */
import { ChainId, int, opt, strict } from "../support/schema-kit";
import { defineTrigger, triggerShape } from "../kind";

export const blockShape = triggerShape({
  type: "block",
  doc: "Fires every `interval` blocks; output the block.",
  config: () =>
    strict(
      { interval: int(1), chainId: opt(ChainId) },
      "block trigger. `interval` × the chain's block time must be at least `min_block_interval_s` (60 s) (TRIGGER_TOO_FREQUENT).",
    ),
  chainAware: true,
});

export const block = /* @__PURE__ */ defineTrigger(blockShape);
