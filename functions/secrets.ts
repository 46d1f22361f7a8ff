/** GET /secrets, PUT and DELETE /secrets/{name}: the secrets group only. */
import { handle } from "hono/aws-lambda";
import { wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { secretRoutes } from "../shared/secret/routes";

wireAws();

export const handler = handle(behindRouter(createApp(secretRoutes)));
