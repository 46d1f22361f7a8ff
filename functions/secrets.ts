/** GET /secrets, PUT and DELETE /secrets/{name}. */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { routeGroups } from "../shared/http/service";

export const handler = handle(createApp(routeGroups.secrets));
