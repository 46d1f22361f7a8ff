/**
 * JSON calls the way a client makes them, as a signed-in owner: `call` sends a JSON body when one is given and
 * answers status, headers and the parsed body, over the wire to a real server (`jsonClient`) or to an app in
 * process (`appCall`). Over the wire also: `ownerWithWallet` signs a new owner in and registers one wallet (salt
 * `salt` on the default chain), `createWorkflow` creates one for that wallet (201 expected; the definition's
 * parts a test leaves out filled in by ./workflows.ts), `waitTerminal` polls an execution until it is no longer
 * pending.
 */
import { expect } from "vitest";
import type { Address } from "viem";
import { signIn, type RequestTarget, type SignedIn } from "./auth";
import { httpTarget } from "./server";
import { manualWorkflow } from "./workflows";

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Owner extends SignedIn {
  wallet: Address;
}

/** A wallet's workflow counts (API.md §11) before any workflow uses it. */
export const NO_WORKFLOW_COUNTS = {
  totalWorkflowCount: 0,
  enabledWorkflowCount: 0,
  disabledWorkflowCount: 0,
  completedWorkflowCount: 0,
  failedWorkflowCount: 0,
};

/** The path GET reads one execution at (what a trigger's Location names). */
export const executionPath = (workflowId: string, executionId: string) => `/executions/${executionId}?workflowId=${workflowId}`;

function caller(target: () => RequestTarget) {
  return async function call(who: SignedIn, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await target().request(path, {
      method,
      headers: { ...who.headers, ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Json };
  };
}

/** `call` against an app in process (`app.request`): no server. */
export const appCall = (app: RequestTarget) => caller(() => app);

export function jsonClient(baseUrl: () => string) {
  const call = caller(() => httpTarget(baseUrl()));

  async function ownerWithWallet(salt = "1"): Promise<Owner> {
    const who = await signIn(httpTarget(baseUrl()), { expiresInMs: 24 * 3600_000 });
    const res = await call(who, "POST", "/wallets", { salt });
    expect(res.status).toBe(201);
    return { ...who, wallet: res.body.address as Address };
  }

  /** POST /workflows of `parts` over manualWorkflow() for `who`'s wallet; answers the created workflow. */
  async function createWorkflow(who: Owner, parts: Json = {}): Promise<Json> {
    const res = await call(who, "POST", "/workflows", { smartWalletAddress: who.wallet, ...manualWorkflow(parts) });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body;
  }

  /** GETs the execution at `path` (see executionPath) every `intervalMs`, each answered 200, until it is not pending. */
  async function waitTerminal(who: SignedIn, path: string, { timeoutMs = 60_000, intervalMs = 50 } = {}): Promise<Json> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const res = await call(who, "GET", path);
      expect(res.status).toBe(200);
      if (res.body.status !== "pending") return res.body;
      if (Date.now() > until) throw new Error(`the execution at ${path} was still pending after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }

  return { call, ownerWithWallet, createWorkflow, waitTerminal };
}
