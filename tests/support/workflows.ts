/**
 * Workflow definitions for tests, with the parts a test does not care about filled in: a manual trigger `t` named
 * `start` and one customCode node `one` that returns 1. jsonClient's `createWorkflow(who, parts)` (./client.ts)
 * creates one over HTTP for the owner's wallet: `createWorkflow(who, { trigger: trigger("cron", { schedules }) })`.
 */
type Part = Record<string, unknown>;

export const codeNode = (id = "one", source = "return 1") => ({ id, name: id, type: "customCode", config: { source } });

/** A trigger `t` of `type` with `config`, named `name`. */
export const trigger = (type: string, config: Part, name = "start") => ({ id: "t", name, type, config });

export const manualTrigger = (data: unknown = {}, name = "start") => trigger("manual", { data }, name);

/** A definition: `parts` (trigger, nodes, edges, maxExecution, …) over a manual trigger and one node. */
export const manualWorkflow = (parts: Part = {}): Part => ({ trigger: manualTrigger(), nodes: [codeNode()], ...parts });
