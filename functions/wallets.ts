/** Wallet routes: list, create, update, withdraw, withdrawals, getNonce: the wallet group only. */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { walletRoutes } from "../shared/wallet/routes";

export const handler = handle(behindRouter(createApp(walletRoutes)));
