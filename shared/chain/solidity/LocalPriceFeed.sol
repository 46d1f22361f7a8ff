// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import "@openzeppelin/contracts/utils/ShortStrings.sol";

/**
 * A local devnet's stand-in for a public Chainlink price feed (local/devnet/feeds.ts plants it at the feed's public
 * address). It answers as a Chainlink aggregator proxy does: AggregatorV3Interface (`latestRoundData`,
 * `getRoundData`, `decimals`, `description`, `version`) and the older AggregatorInterface (`latestAnswer`,
 * `latestTimestamp`, `latestRound`, `getAnswer`, `getTimestamp`). Decimals and description are immutables, so the
 * runtime code copied with anvil_setCode carries them; rounds live in storage and are written by `setAnswer`, which
 * is open to anyone and emits `NewRound` and `AnswerUpdated` like Chainlink's aggregators: this code only ever runs on
 * local devnets.
 */
contract LocalPriceFeed {
    struct Round {
        int256 answer;
        uint64 startedAt;
        uint64 updatedAt;
    }

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);
    event NewRound(uint256 indexed roundId, address indexed startedBy, uint256 startedAt);

    uint8 public immutable decimals;
    ShortString private immutable _description;
    /** Chainlink's current aggregators answer 4 (OCR); the proxies pass it through. */
    uint256 public constant version = 4;

    uint256 public latestRound;
    mapping(uint256 => Round) private _rounds;

    constructor(uint8 decimals_, string memory description_) {
        decimals = decimals_;
        _description = ShortStrings.toShortString(description_);
    }

    function description() external view returns (string memory) {
        return ShortStrings.toString(_description);
    }

    /** Starts and answers a new round at the current block's time. */
    function setAnswer(int256 answer) external {
        uint256 roundId = latestRound + 1;
        latestRound = roundId;
        _rounds[roundId] = Round(answer, uint64(block.timestamp), uint64(block.timestamp));
        emit NewRound(roundId, msg.sender, block.timestamp);
        emit AnswerUpdated(answer, roundId, block.timestamp);
    }

    function getRoundData(
        uint80 roundId
    ) public view returns (uint80, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) {
        Round memory round = _rounds[roundId];
        require(round.updatedAt > 0, "No data present");
        return (roundId, round.answer, round.startedAt, round.updatedAt, roundId);
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return getRoundData(uint80(latestRound));
    }

    function latestAnswer() external view returns (int256) {
        return _rounds[latestRound].answer;
    }

    function latestTimestamp() external view returns (uint256) {
        return _rounds[latestRound].updatedAt;
    }

    function getAnswer(uint256 roundId) external view returns (int256) {
        return _rounds[roundId].answer;
    }

    function getTimestamp(uint256 roundId) external view returns (uint256) {
        return _rounds[roundId].updatedAt;
    }
}
