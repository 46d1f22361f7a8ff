/** Authentication: sign-in proofs (message.ts), access tokens (token.ts) and their public routes. */
export { verifyExchange, parseAuthMessage, AUTH_SENTENCE, AUTH_LINE_PREFIXES, type AuthMessage, type VerifiedExchange } from "./message";
export { issueToken, authenticate, jwks } from "./token";
export { authRoutes } from "./routes";
