/**
 * The route groups of the service. Each Lambda mounts one group (functions/*); the local server and the
 * API's catch-all mount them all, so unknown paths and methods answer 404/405 the same everywhere.
 */
import { createApp, type Route } from "./app";
import { healthRoutes } from "../health";
import { authRoutes } from "../auth/routes";
import { secretRoutes } from "../secret/routes";
import { walletRoutes } from "../wallet/routes";
import { openapiRoutes } from "./openapi";

export const routeGroups = {
  core: [...healthRoutes, ...authRoutes, ...openapiRoutes],
  secrets: secretRoutes,
  wallets: walletRoutes,
} satisfies Record<string, Route[]>;

export const allRoutes: Route[] = Object.values(routeGroups).flat();

/** The whole service as one app (local server, catch-all Lambda, end-to-end tests). */
export const createServiceApp = () => createApp(allRoutes);
