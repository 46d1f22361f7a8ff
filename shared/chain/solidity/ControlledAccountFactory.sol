// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

import "@openzeppelin/contracts/utils/Create2.sol";
import "@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol";

import "./ControlledAccount.sol";

/**
 * Factory for ControlledAccount (modelled on the v0.7 SimpleAccountFactory).
 * Every account it creates gets this factory's `controller`; accounts are ERC1967 proxies
 * deployed with CREATE2 (salt = `salt`), so the address depends on (factory, owner, salt).
 * createAccount returns the existing account when already deployed, so
 * EntryPoint.getSenderAddress(initCode) works before and after deployment.
 */
contract ControlledAccountFactory {
    ControlledAccount public immutable accountImplementation;
    address public immutable controller;

    constructor(IEntryPoint _entryPoint, address _controller) {
        accountImplementation = new ControlledAccount(_entryPoint);
        controller = _controller;
    }

    /// @notice Deploy (or return the already deployed) account of `owner` for `salt`.
    function createAccount(address owner, uint256 salt) public returns (ControlledAccount ret) {
        address addr = getAddress(owner, salt);
        if (addr.code.length > 0) {
            return ControlledAccount(payable(addr));
        }
        ret = ControlledAccount(payable(new ERC1967Proxy{salt: bytes32(salt)}(
            address(accountImplementation),
            _initCall(owner)
        )));
    }

    /// @notice Counterfactual address of createAccount(owner, salt).
    function getAddress(address owner, uint256 salt) public view returns (address) {
        return Create2.computeAddress(bytes32(salt), keccak256(abi.encodePacked(
            type(ERC1967Proxy).creationCode,
            abi.encode(address(accountImplementation), _initCall(owner))
        )));
    }

    function _initCall(address owner) internal view returns (bytes memory) {
        return abi.encodeWithSignature("initialize(address,address)", owner, controller);
    }
}
