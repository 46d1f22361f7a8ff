/** GET /secrets, PUT and DELETE /secrets/{name}: the secrets group only. */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { secretRoutes } from "../shared/secret/routes";

export const handler = handle(behindRouter(createApp(secretRoutes)));
