/**
 * Wallet routes: list, create, update, withdraw, withdrawals, getNonce; and token metadata (`/tokens/{address}`).
 * The list, create and token routes also accept partner assertions (API.md §21.1).
 */
import { handle } from "hono/aws-lambda";
import { wireAws } from "../shared/service/wire-aws";
import { createApp } from "../shared/http/app";
import { behindRouter } from "./viewer";
import { walletRoutes } from "../shared/wallet/routes";
import { tokenRoutes } from "../shared/token/routes";
import { verifyPartnerAssertion } from "../shared/http/partner-assertion";

wireAws();

export const handler = handle(behindRouter(createApp([...walletRoutes, ...tokenRoutes], { partners: verifyPartnerAssertion })));
