/**
 * Public authentication routes (API.md §7.1, §6.2): exchange a signed sign-in message for a token, and
 * publish the keys that verify tokens. endpoints.ts declares them.
 */
import { route, type Route } from "../http/app";
import { verifyExchange } from "./message";
import { issueToken, jwks } from "../http/token";
import * as Contract from "./endpoints";

export const authRoutes: Route[] = [
  route(Contract.exchange, async (c, { body }) => {
    const proof = await verifyExchange(body);
    const token = await issueToken(proof.owner, proof.chainId, proof.expiresAtMs);
    return c.json({ token, expiresAt: proof.expiresAt, subject: proof.owner }, 200);
  }),
  route(Contract.jwks, async (c) => c.json(await jwks(), 200, { "Cache-Control": "public, max-age=300" })),
];
