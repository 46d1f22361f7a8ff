/**
 * The whole service as one app: the local server (`npm start`) and the end-to-end tests mount every group.
 * In AWS each group is its own function (functions/*), which imports only its group; this module imports
 * them all, so no function imports it.
 */
import { createApp, type Route } from "../http/app";
import { healthRoutes } from "./health";
import { authRoutes } from "../auth/routes";
import { secretRoutes } from "../secret/routes";
import { walletRoutes } from "../wallet/routes";
import { tokenRoutes } from "../token/routes";
import { workflowRoutes } from "../workflow/routes";
import { runRoutes } from "../execution/run-routes";
import { triggerRunRoutes } from "../watch/trigger-run-routes";
import { executionRoutes, workflowExecutionRoutes } from "../execution/routes";
import { openapiRoutes } from "./openapi";
import { verifyPartnerAssertion } from "../http/partner-assertion";

const routeGroups = {
  core: [...healthRoutes, ...authRoutes, ...openapiRoutes],
  secrets: secretRoutes,
  // One function in AWS (functions/wallets.ts): token metadata reads the chain as the wallet routes do.
  wallets: [...walletRoutes, ...tokenRoutes],
  workflows: workflowRoutes,
  runs: [...runRoutes, ...triggerRunRoutes],
  workflowExecutions: workflowExecutionRoutes,
  executions: executionRoutes,
} satisfies Record<string, Route[]>;

export const allRoutes: Route[] = Object.values(routeGroups).flat();

export const createServiceApp = () => createApp(allRoutes, { partners: verifyPartnerAssertion });
