// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import "@openzeppelin/contracts/utils/ShortStrings.sol";

/**
 * A local devnet's stand-in for a public token (local/devnet/tokens.ts plants it at the token's public address).
 * Name, symbol and decimals are immutables, so the runtime code alone is the token: it is copied to the public
 * address with anvil_setCode, no storage to set. `mint` is open to anyone: this code only ever runs on local devnets.
 */
contract LocalToken is ERC20 {
    ShortString private immutable _tokenName;
    ShortString private immutable _tokenSymbol;
    uint8 private immutable _tokenDecimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) ERC20("", "") {
        _tokenName = ShortStrings.toShortString(name_);
        _tokenSymbol = ShortStrings.toShortString(symbol_);
        _tokenDecimals = decimals_;
    }

    function name() public view override returns (string memory) {
        return ShortStrings.toString(_tokenName);
    }

    function symbol() public view override returns (string memory) {
        return ShortStrings.toString(_tokenSymbol);
    }

    function decimals() public view override returns (uint8) {
        return _tokenDecimals;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}

/** WETH9's interface on top of LocalToken: ether in by `deposit` (or a plain transfer), out by `withdraw`. */
contract LocalWrappedEther is LocalToken {
    event Deposit(address indexed dst, uint256 wad);
    event Withdrawal(address indexed src, uint256 wad);

    constructor() LocalToken("Wrapped Ether", "WETH", 18) {}

    receive() external payable {
        deposit();
    }

    function deposit() public payable {
        _mint(msg.sender, msg.value);
        emit Deposit(msg.sender, msg.value);
    }

    function withdraw(uint256 wad) external {
        _burn(msg.sender, wad);
        emit Withdrawal(msg.sender, wad);
        (bool sent, ) = msg.sender.call{value: wad}("");
        require(sent, "WETH: ether transfer failed");
    }
}
