/**
 * GET /executions, :count, :stats, /executions/{id}, :getStatus, :stream and POST :signal: the executions group only. Behind
 * API Gateway a stream is answered buffered (it ends at a terminal status or the function's timeout); clients
 * that follow a run live use the streaming Function URL of functions/stream.ts.
 */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { Resource } from "sst";
import { executionRoutes } from "../shared/execution/routes";
import { setBus } from "../shared/execution/bus";
import { createEventBridgeBus } from "../shared/execution/bus/eventbridge";

// A signal that ends a wait hands the run to the runner function through the app's bus (API.md §17.1).
setBus(createEventBridgeBus({ busName: (Resource as unknown as { Bus: { name: string } }).Bus.name }));

export const handler = handle(behindRouter(createApp(executionRoutes)));
