/**
 * Chain access shared by contractRead, balance, contractWrite and ethTransfer: the node's chain client and
 * `eth_call` with its failures told apart: the contract refused (CALL_REVERTED, with the revert reason when
 * there is one) or the RPC failed (RPC_ERROR). Messages never carry the RPC URL (it may hold an API key).
 */
import {
  AbiDecodingDataSizeTooSmallError,
  AbiDecodingZeroDataError,
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  ExecutionRevertedError,
  RawContractError,
  decodeErrorResult,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { chainSettings, publicClient } from "../../chain/chains";
import { StepFailure } from "../kind";

export function chainClient(chainId: number): PublicClient {
  return publicClient(configuredChain(chainId));
}

/** The node's chain settings; a chain no longer configured fails the step (RPC_ERROR). */
export function configuredChain(chainId: number) {
  try {
    return chainSettings(chainId);
  } catch {
    throw new StepFailure("RPC_ERROR", `chain ${chainId} is not configured`);
  }
}

export type CallFailure = { code: "CALL_REVERTED" | "RPC_ERROR"; message: string };

/** Whether an error from viem means the contract refused the call rather than the RPC failing. */
export function isRevert(err: unknown): boolean {
  return (
    err instanceof BaseError &&
    Boolean(
      err.walk(
        (e) =>
          e instanceof ExecutionRevertedError ||
          e instanceof RawContractError ||
          e instanceof ContractFunctionRevertedError ||
          e instanceof ContractFunctionZeroDataError ||
          e instanceof AbiDecodingZeroDataError ||
          e instanceof AbiDecodingDataSizeTooSmallError,
      ),
    )
  );
}

/** The failure of a chain call as a step failure code and a message without URLs. */
export function callFailure(err: unknown): CallFailure {
  if (isRevert(err)) return { code: "CALL_REVERTED", message: revertMessage(err as BaseError) };
  return { code: "RPC_ERROR", message: `RPC request failed: ${err instanceof BaseError ? err.shortMessage : "unknown error"}` };
}

function revertMessage(err: BaseError): string {
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError | null;
  if (reverted?.reason) return `execution reverted: ${reverted.reason}`;
  const data = findRevertData(err);
  if (data && data !== "0x") {
    try {
      const decoded = decodeErrorResult({ data });
      const [first] = decoded.args ?? [];
      if (decoded.errorName === "Error" && typeof first === "string") return `execution reverted: ${first}`;
      if (decoded.errorName === "Panic") return `execution reverted: panic ${String(first)}`;
    } catch {
      // a custom error: keep the plain message
    }
  }
  if (err.walk((e) => e instanceof AbiDecodingZeroDataError || e instanceof ContractFunctionZeroDataError)) {
    return "the call returned no data (no such function or no contract at the address)";
  }
  return "execution reverted";
}

function findRevertData(err: BaseError): Hex | undefined {
  let found: Hex | undefined;
  err.walk((e) => {
    const data = (e as { data?: unknown }).data;
    if (typeof data === "string" && /^0x[0-9a-fA-F]*$/.test(data)) found = data as Hex;
    else if (typeof data === "object" && data !== null && typeof (data as { data?: unknown }).data === "string")
      found = (data as { data: Hex }).data;
    return false;
  });
  return found;
}

/** `eth_call`; the returned data, or the classified failure. */
export async function ethCall(
  client: PublicClient,
  request: { from?: Address; to: Address; data: Hex; value?: bigint },
): Promise<{ ok: true; data: Hex } | ({ ok: false } & CallFailure)> {
  try {
    const { data } = await client.call({
      to: request.to,
      data: request.data,
      ...(request.from ? { account: request.from } : {}),
      ...(request.value ? { value: request.value } : {}),
    });
    return { ok: true, data: data ?? "0x" };
  } catch (err) {
    return { ok: false, ...callFailure(err) };
  }
}

/** A chain read whose failure fails the step (RPC_ERROR or CALL_REVERTED). */
export async function read<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const failure = callFailure(err);
    throw new StepFailure(failure.code, `${what}: ${failure.message}`);
  }
}
