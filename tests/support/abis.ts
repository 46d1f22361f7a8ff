/**
 * ABI fragments the tests send in `contractAbi` or call with viem, written once (named inputs, as a client would
 * send them). The TestToken's own ABI and the Transfer event sit in chain.ts beside its source.
 */
import { parseAbiItem } from "viem";

/** ERC-20 `transfer(to, amount)`. */
export const transferFunction = parseAbiItem("function transfer(address to, uint256 amount) returns (bool)");

/** TestToken's `mint(to, amount)`. */
export const mintFunction = parseAbiItem("function mint(address to, uint256 amount)");

/** ERC-20 `balanceOf(who)`. */
export const balanceOfFunction = parseAbiItem("function balanceOf(address who) view returns (uint256)");

/** The Burst contracts' `burst(to, n)`: emits Transfer logs of values 1…n to `to` (watcher tests). */
export const burstFunction = parseAbiItem("function burst(address to, uint256 n)");
