/** The workflow routes (create, list, count, retrieve, cancel, pause, resume): the workflows group only. */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { workflowRoutes } from "../shared/workflow/routes";
import { workflowExecutionRoutes } from "../shared/execution/routes";

export const handler = handle(createApp([...workflowRoutes, ...workflowExecutionRoutes]));
