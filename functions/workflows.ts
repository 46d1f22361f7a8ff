/**
 * The workflow routes (create, list, count, retrieve, cancel, pause, resume), running them (trigger, simulate,
 * estimateFees) and running one part (nodes:run, triggers:run).
 */
import { handle } from "hono/aws-lambda";
import { awsBus, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { awsSandbox } from "../shared/service/wire-aws-sandbox";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { workflowRoutes } from "../shared/workflow/routes";
import { workflowExecutionRoutes } from "../shared/execution/routes";
import { runRoutes } from "../shared/execution/run-routes";
import { triggerRunRoutes } from "../shared/watch/trigger-run-routes";

// Asynchronous triggers go to the runner function through the runner queue; create, pause, resume and cancel keep
// time triggers' schedules. Scripts of blocking triggers, simulations and nodes:run run in the sandbox function.
wireAws(awsBus, awsScheduler, awsSandbox);

export const handler = handle(behindRouter(createApp([...workflowRoutes, ...workflowExecutionRoutes, ...runRoutes, ...triggerRunRoutes])));
