/**
 * GET /executions, :count, :stats, /executions/{id}, :getStatus and :stream: the executions group only. Behind
 * API Gateway a stream is answered buffered (it ends at a terminal status or the function's timeout); clients
 * that follow a run live use the streaming Function URL of functions/stream.ts.
 */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { executionRoutes } from "../shared/execution/routes";

export const handler = handle(behindRouter(createApp(executionRoutes)));
