/**
 * Second baseline for functions/workflows.ts: bench/baselines/workflows-clients.ts plus what the engine cannot
 * run without (bench/baselines/engine.ts), since a blocking trigger runs the workflow in this function.
 */
import { handler as routes } from "./workflows-clients";
import { runEngineParts } from "./engine";

export const handler = async (event: Parameters<typeof routes>[0], context: Parameters<typeof routes>[1]) => {
  if ((event as { rawPath?: string }).rawPath?.endsWith(":trigger")) await runEngineParts(process.env.RPC_URL ?? "");
  return routes(event, context);
};
