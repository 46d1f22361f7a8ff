/**
 * Authentication: sign-in proofs (message.ts), access tokens (../http/token.ts: the app verifies them on every
 * request) and their public routes.
 */
export { verifyExchange, parseAuthMessage, AUTH_SENTENCE, AUTH_LINE_PREFIXES, type AuthMessage, type VerifiedExchange } from "./message";
export { issueToken, authenticate, jwks } from "../http/token";
export { authRoutes } from "./routes";
