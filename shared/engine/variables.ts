/**
 * The variables of API.md §8.6 for one run and each of its steps: template roots and, for JavaScript, globals.
 *
 *   <trigger name>   the trigger step's output plus `input` (the trigger config)
 *   <node name>      the step output `{data}` of each ancestor that ran
 *   inputVariables   the workflow's, with the run's `triggerInput` merged over them (top-level keys replaced);
 *                    `settings` always present, its service-written `runner` and `chainId` kept
 *   secrets          the referenced secrets; `apContext.configVars` is the same object
 *   context          workflowId, executionId, executionIndex, owner, smartWalletAddress, chainId
 *   date             {now, nowIso, now_iso} at the start of the step
 */
import { referencedPaths, referencedSecretNames, parsePath, type TemplatePath, type Variables } from "../templates";
import type { RunDefinition, RunInput } from "./types";
import { kinds as defaultKinds } from "../kinds/kinds";
import { type Registry } from "../kinds/registry";

/**
 * The secret names a definition refers to: `{{secrets.NAME}}` / `{{apContext.configVars.NAME}}` templates in
 * any config string (contractAbi aside), and in JavaScript text (customCode sources, branch and filter
 * expressions, a loop runner's source) the same paths written as code, `secrets.NAME` or `secrets["NAME"]`,
 * since the variables are globals there. Only these are decrypted for the run (API.md §12.5).
 */
export function definitionSecretNames(definition: Pick<RunDefinition, "nodes">, kinds: Registry = defaultKinds): string[] {
  const paths: TemplatePath[] = [];
  for (const node of definition.nodes) {
    paths.push(...referencedPaths(node.config));
    // The JavaScript each kind runs (customCode sources, branch and filter expressions, a loop runner's).
    for (const code of kinds.javaScript(node)) paths.push(...codePaths(code));
  }
  return referencedSecretNames(paths);
}

const CODE_PATH = /\b(?:secrets|apContext\s*\.\s*configVars)\s*(?:\.\s*[A-Za-z_$][A-Za-z0-9_$]*|\[\s*(?:'[^']*'|"[^"]*")\s*\])/g;

/** `secrets.X`, `secrets["X"]`, `apContext.configVars.X` written in JavaScript, as template paths. */
function codePaths(code: string): TemplatePath[] {
  const found: TemplatePath[] = [];
  for (const match of code.matchAll(CODE_PATH)) {
    const path = parsePath(match[0].replace(/\s+/g, ""));
    if (path) found.push(path);
  }
  return found;
}

/** The variables every step of the run shares (everything but node outputs and `date`). */
export function runVariables(input: RunInput, secrets: Record<string, string>): Record<string, unknown> {
  const { definition, triggerInput, context } = input;
  const merged: Record<string, unknown> = { ...definition.inputVariables, ...(triggerInput ?? {}) };
  const stored = definition.inputVariables.settings;
  const storedSettings = isObject(stored) ? stored : {};
  const sent = merged.settings;
  merged.settings = {
    ...(isObject(sent) ? sent : {}),
    ...pick(storedSettings, ["runner", "chainId"]),
    ...(storedSettings.chainId === undefined ? { chainId: definition.chainId } : {}),
  };
  const shared = { ...secrets };
  return {
    ...merged,
    [definition.trigger.name]: { ...input.triggerOutput, input: definition.trigger.config },
    secrets: shared,
    apContext: { configVars: shared },
    context: { ...context },
  };
}

/** The variables of one step: the run's, the outputs of the node's ancestors that ran, and `date` now. */
export function stepVariables(
  run: Readonly<Record<string, unknown>>,
  ancestorOutputs: Iterable<[name: string, output: unknown]>,
  now: number,
  extra: Record<string, unknown> = {},
): Variables {
  const variables: Record<string, unknown> = { ...run };
  // Defined, not assigned: a node may be named `__proto__` (§18.6).
  for (const [name, output] of ancestorOutputs)
    Object.defineProperty(variables, name, { value: output, enumerable: true, writable: true, configurable: true });
  const nowIso = new Date(now).toISOString();
  variables.date = { now, nowIso, now_iso: nowIso };
  return Object.assign(variables, extra);
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
const pick = (o: Record<string, unknown>, keys: string[]) =>
  Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
