/** Wallet routes: list, create, update, withdraw, withdrawals, getNonce; and token metadata (`/tokens/{address}`). */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { walletRoutes } from "../shared/wallet/routes";
import { tokenRoutes } from "../shared/token/routes";

export const handler = handle(behindRouter(createApp([...walletRoutes, ...tokenRoutes])));
