/**
 * The workflow routes (create, list, count, retrieve, cancel, pause, resume), running them (trigger, simulate,
 * estimateFees) and running one part (nodes:run, triggers:run).
 */
import "./bootstrap";
import { installScheduler } from "../shared/service/scheduler";
import { handle } from "hono/aws-lambda";
import { Resource } from "sst";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { workflowRoutes } from "../shared/workflow/routes";
import { workflowExecutionRoutes } from "../shared/execution/routes";
import { runRoutes } from "../shared/execution/run-routes";
import { triggerRunRoutes } from "../shared/watch/trigger-run-routes";
import { setBus } from "../shared/execution/bus";
import { createEventBridgeBus } from "../shared/execution/bus/eventbridge";

installScheduler();

// Asynchronous triggers go to the runner function through the app's bus (infra/bus.ts).
setBus(createEventBridgeBus({ busName: (Resource as unknown as { Bus: { name: string } }).Bus.name }));

export const handler = handle(behindRouter(createApp([...workflowRoutes, ...workflowExecutionRoutes, ...runRoutes, ...triggerRunRoutes])));
