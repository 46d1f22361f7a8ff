/**
 * Public authentication routes (API.md §7.1, §6.2): exchange a signed sign-in message for a token, and
 * publish the keys that verify tokens.
 */
import type { Route } from "../http/app";
import { readJsonBody } from "../http/validate";
import { verifyExchange } from "./message";
import { issueToken, jwks } from "./token";

export const authRoutes: Route[] = [
  {
    method: "POST",
    path: "/auth:exchange",
    public: true,
    handler: async (c) => {
      const proof = await verifyExchange(await readJsonBody(c));
      const token = await issueToken(proof.owner, proof.chainId, proof.expiresAtMs);
      return c.json({ token, expiresAt: proof.expiresAt, subject: proof.owner }, 200);
    },
  },
  {
    method: "GET",
    path: "/.well-known/jwks.json",
    public: true,
    handler: async (c) => c.json(await jwks(), 200, { "Cache-Control": "public, max-age=300" }),
  },
];
