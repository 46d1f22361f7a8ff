/**
 * Health, sign-in, JWKS, the API document, and the API's catch-all route. It mounts only these handlers; the
 * other groups' declarations (shared/service/api.ts, no handlers) keep 404/405 exact for every path, and a request for another
 * function's route that API Gateway sent here (a percent-encoded prefix such as `/%77allets`) is redirected to
 * its canonical path.
 */
import { handle } from "hono/aws-lambda";
import { awsTokenSigner, wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { api } from "../shared/service/api";
import { healthRoutes } from "../shared/service/health";
import { authRoutes } from "../shared/auth/routes";
import { openapiRoutes } from "../shared/service/openapi";

// Sign-in signs tokens with the stage's KMS token key.
wireAws(awsTokenSigner);

export const handler = handle(behindRouter(createApp([...healthRoutes, ...authRoutes, ...openapiRoutes], { api })));
