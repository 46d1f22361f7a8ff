/**
 * How a deploy bundles a Lambda entry point, shared by the bundle budget (bench/bundles.ts) and the test
 * that keeps each group's bundle free of packages it does not use (tests/functions/bundles.test.ts).
 *
 * These are SST v3's esbuild options for a Node function (its Go builder, pkg/runtime/node/build.go:
 * bundle everything, ESM, platform node, keepNames, mainFields module/main, the createRequire banner,
 * `sharp` and `pg-native` external) with SST's deploy defaults (`nodejs.minify: true`, no source map).
 * One difference: SST passes esbuild target `esnext` (its `nodejs.esbuild.target` only takes ES versions),
 * while this build names the runtime, `node22`: for this code the two bundles differ by under 0.1%, and
 * the Lambda runtime (`nodejs22.x`, infra/api.ts) is what decides the Node version.
 */
import { build, type BuildOptions, type Metafile } from "esbuild";
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** CommonJS dependencies (parts of the AWS SDK) call require(): ESM output needs a real one (SST's banner). */
export const ESM_REQUIRE_BANNER = [
  `import { createRequire as topLevelCreateRequire } from 'module';`,
  `const require = topLevelCreateRequire(import.meta.url);`,
  `import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"`,
  `const __filename = topLevelFileUrlToPath(import.meta.url)`,
  `const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))`,
].join("\n");

export const LAMBDA_BUILD_OPTIONS = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node22",
  minify: true,
  keepNames: true,
  mainFields: ["module", "main"],
  external: ["sharp", "pg-native"],
  sourcemap: false,
  // CommonJS dependencies (parts of the AWS SDK) call require(): ESM output needs a real one.
  banner: {
    js: [
      `import { createRequire as topLevelCreateRequire } from 'module';`,
      `const require = topLevelCreateRequire(import.meta.url);`,
      `import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"`,
      `const __filename = topLevelFileUrlToPath(import.meta.url)`,
      `const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))`,
    ].join("\n"),
  },
  metafile: true,
  logLevel: "silent",
  absWorkingDir: ROOT,
} satisfies BuildOptions;

/** The Lambda entry points: `functions/*.ts` that export a `handler` (viewer.ts, a helper, exports none). */
export function lambdaEntries(): string[] {
  const dir = join(ROOT, "functions");
  return readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .filter((f) => /export\s+(const|let|async\s+function|function)\s+handler\b/.test(readFileSync(join(dir, f), "utf8")))
    .sort()
    .map((f) => `functions/${f}`);
}

export interface LambdaBundle {
  /** `secrets` for functions/secrets.ts. */
  name: string;
  entry: string;
  /** Size of the minified output, banner included. */
  bytes: number;
  metafile: Metafile;
  /** Bytes in the output per npm package (`@scope/name`), and `(own)` for the project's modules; only what is in the output. */
  packages: Map<string, number>;
}

/**
 * Bundles one entry point (a path relative to the repository root, or absolute) as a deploy would.
 * With `outfile` the bundle is written there (to import it); without it, it stays in memory.
 */
export async function bundleLambda(entry: string, outfile?: string): Promise<LambdaBundle> {
  const result = await build({
    ...LAMBDA_BUILD_OPTIONS,
    entryPoints: [entry],
    ...(outfile ? { outfile, write: true } : { outdir: "out", write: false }),
  });
  const [output] = Object.values(result.metafile.outputs);
  if (!output) throw new Error(`esbuild produced no output for ${entry}`);
  const packages = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    if (bytesInOutput === 0) continue; // parsed, but tree-shaken away
    const pkg = packageOf(input) ?? "(own)";
    packages.set(pkg, (packages.get(pkg) ?? 0) + bytesInOutput);
  }
  return { name: basename(entry).replace(/\.[cm]?[tj]s$/, ""), entry, bytes: output.bytes, metafile: result.metafile, packages };
}

/** The npm package a metafile input belongs to (its last `node_modules/` segment), undefined for our own modules. */
function packageOf(input: string): string | undefined {
  const at = input.lastIndexOf("node_modules/");
  if (at < 0) return undefined;
  const [first, second] = input.slice(at + "node_modules/".length).split("/");
  return first!.startsWith("@") ? `${first}/${second}` : first;
}

/**
 * The shortest import chain from the entry point to a module of `pkg` that has bytes in the output: where
 * to look when a package appears where it should not. (When two importers share a package, say our own
 * module and viem both importing @noble/curves, this is one of the chains, not necessarily the one whose
 * exports survived tree-shaking.)
 */
export function importChain(metafile: Metafile, entry: string, pkg: string): string[] | undefined {
  const inOutput = new Set(
    Object.values(metafile.outputs).flatMap((o) =>
      Object.entries(o.inputs)
        .filter(([, i]) => i.bytesInOutput > 0)
        .map(([path]) => path),
    ),
  );
  const previous = new Map<string, string | null>([[entry, null]]);
  const queue = [entry];
  while (queue.length > 0) {
    const at = queue.shift()!;
    if (packageOf(at) === pkg && inOutput.has(at)) {
      const chain: string[] = [];
      for (let p: string | null | undefined = at; p; p = previous.get(p)) chain.unshift(p);
      return chain;
    }
    for (const imported of metafile.inputs[at]?.imports ?? []) {
      if (imported.external || previous.has(imported.path)) continue;
      previous.set(imported.path, at);
      queue.push(imported.path);
    }
  }
  return undefined;
}
