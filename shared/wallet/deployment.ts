/**
 * The deployment of an undeployed wallet by its first user operation (API.md §11, §19). Only one operation of an
 * account may carry init code: a bundler refuses a second one while the first is in its mempool (Alto), or drops it
 * from a bundle once the account exists (AA10). So the operations that find the account without code take turns:
 *
 *   - Across processes, a turn is a lease on the wallet item (`deployingBy`, `deployingUntil`; one conditional
 *     UpdateItem, ../store/entities/wallet.ts). Its holder builds its operation with init code; everyone else waits
 *     until the account has code (polling the chain), then builds without init code and sends at once, side by side.
 *   - Within a process, one operation per wallet asks the table; the others wait on it (no extra writes).
 *   - The holder ends the turn once its operation is included or was never sent, so the next may take it at once;
 *     when its fate is unknown (the answer lost, a crash) the lease runs out by itself after DEPLOYMENT_LEASE_MS.
 *
 * A deployed account (the usual case) costs nothing here: the caller's ownership check has already read its code.
 */
import { ulid } from "ulid";
import type { PublicClient } from "viem";
import { ApiError } from "../errors";
import { endDeploymentTurn, takeDeploymentTurn } from "../store/entities/wallet";
import { hasCode } from "./account-owner";
import type { SignableWallet } from "./signing";
import { useRuntime } from "../current-runtime";

/** How long a deployment turn is held at most when its holder cannot end it (its answer was lost, it crashed). */
const DEPLOYMENT_LEASE_MS = 60_000;
/** How long an operation waits for another's deployment at most: past a lease that ran out it takes the turn itself. */
const DEPLOYMENT_WAIT_MS = 2 * DEPLOYMENT_LEASE_MS;
const CODE_POLL_MS = 150;

export interface DeploymentTurn {
  /** True when this operation carries the init code. */
  deploys: boolean;
  /**
   * Ends the turn (a no-op when `deploys` is false): "included" or "not-sent" free it at once, "unknown" leaves the
   * lease to run out (the operation may still land). Never throws.
   */
  end(outcome: "included" | "not-sent" | "unknown"): Promise<void>;
}

const deployed: DeploymentTurn = { deploys: false, end: async () => {} };

/** 503 for an operation that waited `waitMs` for another's deployment of the account. */
export class DeploymentPending extends ApiError {
  constructor(waitMs: number) {
    super(
      503,
      "UPSTREAM_UNAVAILABLE",
      `The wallet's account is being deployed by an earlier user operation that did not complete within ${waitMs} ms; retry shortly.`,
    );
  }
}

/** This process's deployment in flight per wallet: its holder's turn, or the one wait for another process's. */
const inFlight = new Map<string, Promise<void>>();

/**
 * Waits for this operation's turn: answers `deploys: true` when it must carry the init code, else once the account
 * has code (the caller then verifies the wallet again and builds without init code). Gives up after `waitMs`
 * (DeploymentPending, a 503).
 */
export async function deploymentTurn(client: PublicClient, wallet: SignableWallet, waitMs = DEPLOYMENT_WAIT_MS): Promise<DeploymentTurn> {
  if (wallet.deployed) return deployed;
  const key = `${wallet.chainId}:${wallet.address}`;
  const id = { owner: wallet.owner, chainId: wallet.chainId, address: wallet.address };
  const deadline = Date.now() + waitMs;
  for (;;) {
    const waiting = inFlight.get(key);
    if (waiting) {
      await untilSettledOr(waiting, deadline);
    } else {
      let settle!: () => void;
      const turn = new Promise<void>((resolve) => (settle = resolve));
      inFlight.set(key, turn);
      const release = () => {
        if (inFlight.get(key) === turn) inFlight.delete(key);
        settle();
      };
      try {
        const holder = ulid();
        const now = useRuntime().now();
        const taken = await takeDeploymentTurn(id, holder, now, now + DEPLOYMENT_LEASE_MS);
        if (taken.taken) {
          if (await hasCode(client, wallet.address)) {
            // deployed meanwhile (by an operation that just ended its turn, or by the owner)
            await endDeploymentTurn(id, holder);
            release();
            return deployed;
          }
          let ended = false;
          return {
            deploys: true,
            end: async (outcome) => {
              if (ended) return;
              ended = true;
              if (outcome !== "unknown") await endDeploymentTurn(id, holder).catch(() => undefined);
              release();
            },
          };
        }
        // Another process holds the turn: wait (once for all of this process's operations) for the code, or for
        // its lease to run out.
        await untilDeployed(client, wallet, Math.min(taken.until + CODE_POLL_MS, deadline));
        release();
      } catch (err) {
        release();
        throw err;
      }
    }
    if (await hasCode(client, wallet.address)) return deployed;
    if (Date.now() >= deadline) throw new DeploymentPending(waitMs);
  }
}

/** Polls the account's code until it is there or `until` (ms) has passed. */
export async function untilDeployed(client: PublicClient, wallet: { address: `0x${string}` }, until: number): Promise<boolean> {
  for (;;) {
    if (await hasCode(client, wallet.address)) return true;
    const left = until - Date.now();
    if (left <= 0) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(CODE_POLL_MS, left)));
  }
}

async function untilSettledOr(settled: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]);
  clearTimeout(timer);
}
