/**
 * The resource graph of one stage, built without AWS: `sst.config.ts` is bundled as the SST CLI bundles it
 * (pkg/project/stack.go and pkg/js/js.go of SST 3: the `$app`/`$cli`/`$dev` defines, the `shim/run.js`
 * inject, `aws` and `sst` as globals, Pulumi and the AWS SDK external and resolved from `.sst/platform`),
 * then run in a child process with tests/infra/harness.ts standing in for the CLI and for AWS.
 *
 * Needs SST's platform in `.sst/platform` (`.ci/sst-platform` installs it: `sst install`, about a minute).
 */
import { beforeAll } from "vitest";
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Graph, GraphResource } from "./harness";
import { ESM_REQUIRE_BANNER } from "../../bench/lambda-bundle";

export type { Graph, GraphResource };

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PLATFORM = join(ROOT, ".sst", "platform");

/** Installs SST's platform (its components and the pinned AWS provider) when it is missing or stale. */
export function ensurePlatform(): void {
  execFileSync(join(ROOT, ".ci", "sst-platform"), { cwd: ROOT, stdio: "inherit" });
}

export interface GraphOptions {
  stage?: string;
  /** SST secrets of the stage, `Name` → value (SST_SECRET_<Name>); unset ones are not set. */
  secrets?: Record<string, string>;
  /** Variables of the deploying shell (e.g. PARTNERS). */
  env?: Record<string, string>;
}

export const DEFAULT_SECRETS: Record<string, string> = {
  Chains: '[{"chainId":11155111,"rpcUrl":"https://rpc.example","bundlerUrl":"https://bundler.example"}]',
  AuthAllowedUris: "https://app.example.com",
};

/** Builds the stage's graph; throws with the program's output when the deploy would fail before reaching AWS. */
export async function buildGraph({ stage = "test", secrets = DEFAULT_SECRETS, env: shell = {} }: GraphOptions = {}): Promise<Graph> {
  const work = mkdtempSync(join(tmpdir(), "infra-graph-"));
  const outfile = join(PLATFORM, `infra-graph.${process.pid}.${Date.now()}.mjs`);
  const globals = [`import * as aws from "@pulumi/aws";`, `import * as sst from ${JSON.stringify(join(PLATFORM, "src/components"))};`].join(
    "\n",
  );
  try {
    await build({
      stdin: {
        contents: [
          `import { collect } from ${JSON.stringify(join(ROOT, "tests/infra/harness.ts"))};`,
          `import { run } from ${JSON.stringify(join(PLATFORM, "src/auto/run.ts"))};`,
          `import mod from ${JSON.stringify(join(ROOT, "sst.config.ts"))};`,
          `const stage = ${JSON.stringify(stage)};`,
          // The CLI evaluates app() first and defines $app from its answer.
          `globalThis.__infraApp = { ...(await mod.app({ stage })), stage };`,
          `await collect(stage, () => run(mod.run));`,
        ].join("\n"),
        resolveDir: ROOT,
        sourcefile: "eval.ts",
        loader: "ts",
      },
      banner: { js: ESM_REQUIRE_BANNER },
      mainFields: ["module", "main"],
      format: "esm",
      platform: "node",
      nodePaths: [join(PLATFORM, "node_modules")],
      plugins: [
        {
          name: "inject-globals",
          setup(b) {
            b.onLoad({ filter: /\.(js|ts)$/ }, (args) => {
              if (args.path.includes(".sst") || args.path.includes("node_modules")) return undefined;
              return { contents: `${globals}\n${readFileSync(args.path, "utf8")}`, loader: "ts" };
            });
          },
        },
      ],
      external: ["@pulumi/*", "undici", "@pulumiverse/*", "@sst-provider/*", "@aws-sdk/*", "esbuild", "archiver", "glob", "vite"],
      define: {
        $app: "globalThis.__infraApp",
        $cli: JSON.stringify({
          command: "deploy",
          dev: false,
          paths: { home: work, root: ROOT, work: join(ROOT, ".sst"), platform: PLATFORM },
          state: { version: {} },
        }),
        $dev: "false",
      },
      inject: [join(PLATFORM, "src/shim/run.js")],
      outfile,
      write: true,
      bundle: true,
      logLevel: "silent",
    });
    const out = join(work, "graph.json");
    const env: NodeJS.ProcessEnv = { ...shell, PATH: process.env.PATH, HOME: work, INFRA_GRAPH_OUT: out, NODE_OPTIONS: "--no-deprecation" };
    for (const [name, value] of Object.entries(secrets)) env[`SST_SECRET_${name}`] = value;
    try {
      execFileSync(process.execPath, [outfile], { cwd: ROOT, env, stdio: "pipe", timeout: 120_000 });
    } catch (error) {
      const e = error as { stdout?: Buffer; stderr?: Buffer; message: string };
      throw new Error(`the stage's program failed: ${e.message}\n${e.stdout?.toString() ?? ""}\n${e.stderr?.toString() ?? ""}`);
    }
    if (!existsSync(out)) throw new Error("the stage's program wrote no graph");
    return JSON.parse(readFileSync(out, "utf8")) as Graph;
  } finally {
    rmSync(outfile, { force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** The stage's graph, built once before a test file's tests, and lookups into it by type and by name. */
export function stageGraph(options?: GraphOptions) {
  let graph: Graph | undefined;
  beforeAll(async () => {
    ensurePlatform();
    graph = await buildGraph(options);
  }, 300_000);
  const built = (): Graph => {
    if (!graph) throw new Error("the stage's graph is built in beforeAll");
    return graph;
  };
  const ofType = (type: string) => built().resources.filter((r) => r.type === type);
  const one = (type: string, name: string): GraphResource => {
    const found = built().resources.find((r) => r.type === type && r.name === name);
    if (!found) throw new Error(`no ${type} named ${name}`);
    return found;
  };
  return { graph: built, ofType, one };
}
