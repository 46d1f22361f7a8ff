/**
 * GET /executions/{id}:stream on a Lambda Function URL with response streaming (infra/stream.ts): the same
 * route as everywhere, its frames written as they happen through Hono's streamHandle.
 */
import { streamHandle } from "hono/aws-lambda";
import { wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { executionStreamRoutes } from "../shared/execution/routes";

wireAws();

export const handler = streamHandle(behindRouter(createApp(executionStreamRoutes)));
