/**
 * The Address format of API.md §1.5, for requests and answers. A module of its own because EIP-55 checks need
 * keccak-256: a group that never reads or writes an address (secrets) imports nothing from here and so does
 * not carry the hash (tests/functions/bundles.test.ts holds it to that).
 */
import * as v from "valibot";
import { checksumAddress, isAcceptedAddress, isAddressShape } from "../address";
import { component } from "./endpoint";

/** An address in any accepted case (a mixed-case one must carry a valid EIP-55 checksum); output is EIP-55. */
export const AddressString = v.pipe(
  v.string(),
  v.regex(/^0x[0-9a-fA-F]{40}$/, "must be an address (0x followed by 40 hex digits)"),
  v.check((s) => !isAddressShape(s) || isAcceptedAddress(s), "has an invalid EIP-55 checksum"),
  v.transform((s) => checksumAddress(s)),
);

export const Address = component(
  "Address",
  v.pipe(
    AddressString,
    v.description(
      "`0x` + 40 hex digits. Accepted all-lowercase, all-uppercase or in valid EIP-55 mixed case (a mixed-case value with a wrong checksum is rejected); compared case-insensitively; always returned in EIP-55 form.",
    ),
    v.examples(["0x5B38Da6a701c568545dCfcB03FcB875f56beddC4"]),
  ),
);
