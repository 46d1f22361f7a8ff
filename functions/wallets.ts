/** Wallet routes: list, create, update, withdraw, withdrawals, getNonce; and token metadata (`/tokens/{address}`). */
import { handle } from "hono/aws-lambda";
import { wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { walletRoutes } from "../shared/wallet/routes";
import { tokenRoutes } from "../shared/token/routes";

wireAws();

export const handler = handle(behindRouter(createApp([...walletRoutes, ...tokenRoutes])));
