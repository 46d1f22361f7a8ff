/**
 * GET /executions, :count, :stats, /executions/{id}, :getStatus, :stream and POST :signal: the executions group only. Behind
 * API Gateway a stream is answered buffered (it ends at a terminal status or the function's timeout); clients
 * that follow a run live use the streaming Function URL of functions/stream.ts.
 */
import { handle } from "hono/aws-lambda";
import { awsBus, wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { executionRoutes } from "../shared/execution/routes";

// A signal that ends a wait hands the run to the runner function through the runner queue (API.md §17.1).
wireAws(awsBus);

export const handler = handle(behindRouter(createApp(executionRoutes)));
