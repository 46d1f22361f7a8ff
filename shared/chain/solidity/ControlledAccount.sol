// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

import "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import "@account-abstraction/contracts/samples/SimpleAccount.sol";

/**
 * ERC-4337 (EntryPoint v0.7) account owned by an EOA `owner`, which also accepts
 * user operations signed by an optional `controller` (the automation service).
 *
 * - Everything else (execute, executeBatch, deposit helpers, UUPS upgrades, token
 *   callbacks) is inherited unchanged from the v0.7 SimpleAccount sample.
 * - A user operation is valid when `userOp.signature` is an ECDSA signature of the
 *   EIP-191 message `toEthSignedMessageHash(userOpHash)` by the owner OR by the
 *   controller (same scheme as SimpleAccount).
 * - The controller is set once at initialization (by the factory); afterwards only the
 *   owner (directly, or through the account itself via execute) can replace it, and
 *   `setController(address(0))` removes it.
 *
 * Limits of the controller: it may move the account's assets (execute / executeBatch to
 * other addresses) but an operation it signs may never make the account call itself, so it
 * cannot replace itself, touch the owner's powers or upgrade the implementation. The owner
 * can always call setController directly to revoke it.
 */
contract ControlledAccount is SimpleAccount {
    /// @notice Second signer accepted for user operations; address(0) when none.
    address public controller;

    event ControllerChanged(address indexed previousController, address indexed newController);

    constructor(IEntryPoint anEntryPoint) SimpleAccount(anEntryPoint) {}

    /// @notice Called once by the factory through the ERC1967Proxy constructor.
    function initialize(address anOwner, address aController) public initializer {
        _initialize(anOwner);
        _setController(aController);
    }

    /// @dev The owner-only SimpleAccount initializer is disabled: use initialize(owner, controller).
    function initialize(address) public pure override {
        revert("ControlledAccount: use initialize(owner, controller)");
    }

    /// @notice Replace (or remove, with address(0)) the controller. Owner or the account itself.
    function setController(address newController) external onlyOwner {
        _setController(newController);
    }

    function _setController(address newController) internal {
        emit ControllerChanged(controller, newController);
        controller = newController;
    }

    /// @dev Accept an EIP-191 signature of userOpHash by the owner or the controller.
    /// Malformed signatures fail validation instead of reverting (friendlier to gas estimation).
    function _validateSignature(PackedUserOperation calldata userOp, bytes32 userOpHash)
    internal view override returns (uint256 validationData) {
        bytes32 hash = MessageHashUtils.toEthSignedMessageHash(userOpHash);
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(hash, userOp.signature);
        if (err != ECDSA.RecoverError.NoError || signer == address(0)) return SIG_VALIDATION_FAILED;
        if (signer == owner) return SIG_VALIDATION_SUCCESS;
        if (signer == controller && controller != address(0) && _controllerMayRun(userOp.callData)) {
            return SIG_VALIDATION_SUCCESS;
        }
        return SIG_VALIDATION_FAILED;
    }

    /// @dev A controller-signed operation may only be execute / executeBatch to addresses other than
    /// the account itself. Malformed call data fails validation rather than reverting.
    function _controllerMayRun(bytes calldata callData) internal view returns (bool) {
        if (callData.length < 4) return false;
        bytes4 selector = bytes4(callData[:4]);
        if (selector == this.execute.selector) {
            if (callData.length < 36) return false;
            address dest = abi.decode(callData[4:36], (address));
            return dest != address(this);
        }
        if (selector == this.executeBatch.selector) {
            (address[] memory dest, , ) = abi.decode(callData[4:], (address[], uint256[], bytes[]));
            for (uint256 i = 0; i < dest.length; i++) {
                if (dest[i] == address(this)) return false;
            }
            return true;
        }
        return false;
    }
}
