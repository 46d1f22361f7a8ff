/**
 * Factories for the ownership tests (API.md §11.3), deployed from fresh keys:
 *
 * - `deployHostileFactory`: a factory that lies. `getAddress(owner, salt)` answers a configured account (a victim's,
 *   or any address), whoever asks; `createAccount(owner, salt)` deploys the victim's account through the real
 *   factory, so init code naming it even passes the EntryPoint's sender check. It has no `owner()`, and its
 *   fallback answers every other call with no data (so it is also a contract that is not an ERC-20).
 * - `deployControlledAccountFactory`: a genuine second ControlledAccountFactory (our bytecode, any controller).
 */
import { getAddress, parseAbi, type Address } from "viem";
import { artifacts, controlledAccountFactoryAbi } from "../../shared/chain/solidity/artifacts";
import { compileContract, devnet, fundedAccount } from "./chain";

const SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
interface IFactory { function createAccount(address owner, uint256 salt) external returns (address); }
contract HostileFactory {
    address immutable claim;
    IFactory immutable real;
    address immutable victimOwner;
    uint256 immutable victimSalt;
    constructor(address _claim, IFactory _real, address _victimOwner, uint256 _victimSalt) {
        claim = _claim; real = _real; victimOwner = _victimOwner; victimSalt = _victimSalt;
    }
    function getAddress(address, uint256) external view returns (address) { return claim; }
    function createAccount(address, uint256) external returns (address) { return real.createAccount(victimOwner, victimSalt); }
    fallback() external payable {}
}`;

const hostileFactoryAbi = parseAbi([
  "constructor(address claim, address real, address victimOwner, uint256 victimSalt)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
  "function createAccount(address owner, uint256 salt) returns (address)",
]);

const bytecode = () => compileContract("HostileFactory", SOURCE);

/** A factory whose getAddress answers `claim` and whose createAccount deploys `victim` (owner, salt) through `realFactory`. */
export async function deployHostileFactory(p: {
  claim: Address;
  realFactory?: Address;
  victim?: { owner: Address; salt: bigint };
}): Promise<Address> {
  const d = devnet();
  const { wallet } = await fundedAccount();
  const args = [p.claim, p.realFactory ?? d.factory, p.victim?.owner ?? p.claim, p.victim?.salt ?? 0n] as const;
  const hash = await wallet.deployContract({ abi: hostileFactoryAbi, bytecode: bytecode(), args });
  return getAddress((await d.client.waitForTransactionReceipt({ hash })).contractAddress!);
}

/** A new ControlledAccountFactory(entryPoint, controller), deployed with CREATE from a fresh key. */
export async function deployControlledAccountFactory(controller: Address): Promise<Address> {
  const d = devnet();
  const { wallet } = await fundedAccount();
  const hash = await wallet.deployContract({
    abi: controlledAccountFactoryAbi,
    bytecode: artifacts.ControlledAccountFactory.bytecode,
    args: [d.entryPoint, controller],
  });
  return getAddress((await d.client.waitForTransactionReceipt({ hash })).contractAddress!);
}

/** `factory.createAccount(owner, salt)` sent by a fresh funded key (anyone may deploy anyone's account). */
export async function createAccountThrough(factory: Address, owner: Address, salt: bigint): Promise<void> {
  const d = devnet();
  const { wallet } = await fundedAccount();
  const hash = await wallet.writeContract({
    address: factory,
    abi: controlledAccountFactoryAbi,
    functionName: "createAccount",
    args: [owner, salt],
  });
  const receipt = await d.client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`createAccount(${owner}, ${salt}) reverted`);
}
