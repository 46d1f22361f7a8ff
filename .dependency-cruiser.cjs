/**
 * Import rules (README.md "Architecture"): imports run one way, bottom to top, through six layers
 *
 *   base      the loose files of shared/ (config, runtime, log, errors, context, address; pure: templates, json-text)
 *   adapters  ┐
 *   http      │ every folder of shared/, placed in one map, LAYERS below: a layer is tiers of folders, bottom to top
 *   domain    │ (adapters: store, envelope, sandbox, outbound → chain; domain: auth, secret, wallet, token →
 *   service   ┘  kinds → … → execution → watch)
 *   entry     functions/, local/
 *
 * The layer rules are generated from LAYERS, so adding a folder to shared/ means adding it to one tier of one layer
 * there, nothing else; a folder of shared/ that LAYERS does not name is an error (shared-folder-in-a-layer), whether
 * its modules import, are imported or neither (tests/structure/layers.unit.test.ts plants such folders in a copy).
 *
 * A module imports only its own layer's modules (without cycles) and the layers below it; inside a layer only
 * down its tiers (a folder imports the tiers below its own, never another folder of its own tier), so folders form
 * no cycle either. Type-only imports count (tsPreCompilationDeps). No known violations are kept: every rule holds
 * for the whole tree. `npm run deps` also cruises tests/ and bench/, where only the cycle rule applies. Two rules
 * more: no kind file imports another (kinds-apart), and shared/ has no index.ts (no barrels: no-index-file).
 */

/**
 * Every folder of shared/, by layer, bottom to top; a layer's tiers run bottom to top as well. The loose files of
 * shared/ (BASE) sit below every layer, the hosts (ENTRY) above.
 *
 *   adapters  the table (store), envelope encryption and KMS (envelope), the QuickJS sandbox (sandbox), outbound
 *             HTTP and its SSRF guard (outbound) → chains and user operations (chain)
 *   http      the HTTP kit: app factory, declarations, validation, paging, problems, the OpenAPI document's parts;
 *             it knows no domain module
 *   domain    sign-in, secrets, wallets, token metadata → node and trigger kinds → workflow definitions → the
 *             graph runner → executions → chain watchers (the scheduler port and its adapters are workflow's:
 *             they are handed the fire, which claims executions, by the host)
 *   service   the composition root: every group, health, the OpenAPI document, wiring
 */
const LAYERS = [
  { layer: "adapters", tiers: [["store", "envelope", "sandbox", "outbound"], ["chain"]] },
  { layer: "http", tiers: [["http"]] },
  {
    layer: "domain",
    tiers: [["auth", "secret", "wallet", "token"], ["kinds"], ["workflow"], ["engine"], ["execution"], ["watch"]],
  },
  { layer: "service", tiers: [["service"]] },
];
const BASE = "^shared/[^/]+$";
const ENTRY = "^(functions|local)/";

const ANY_FOLDER = "^shared/[^/]+/";
const folders = (names) => `^shared/(${names.join("|")})/`;
const PLACED = LAYERS.flatMap(({ tiers }) => tiers.flat());
const twice = PLACED.filter((name, i) => PLACED.indexOf(name) !== i);
if (twice.length > 0) throw new Error(`.dependency-cruiser.cjs: LAYERS places shared/${twice[0]}/ twice`);
const UNPLACED = { path: ANY_FOLDER, pathNot: folders(PLACED) };

const rule = (name, comment, from, to) => ({ name, comment, severity: "error", from, to });

/** Each layer imports no layer above it. */
const layerRules = LAYERS.map(({ layer, tiers }, i) => {
  const above = LAYERS.slice(i + 1);
  const next = above[0]?.layer ?? "entry";
  const upward = above.length > 0 ? `${folders(above.flatMap((l) => l.tiers.flat()))}|${ENTRY}` : ENTRY;
  return rule(
    `${layer}-below-${next}`,
    `The ${layer} layer (${tiers.flat().join(", ")}) imports no layer above it: ${[...above.map((l) => l.layer), "entry"].join(", ")}.`,
    { path: folders(tiers.flat()) },
    { path: upward },
  );
});

/** Inside a layer, each tier imports only the tiers below it; the folders of one tier do not import each other. */
const tierRules = LAYERS.flatMap(({ layer, tiers }) =>
  tiers.flatMap((tier, j) => {
    const higher = tiers.slice(j + 1).flat();
    if (tier.length === 1 && higher.length === 0) return [];
    const comment =
      tier.length === 1
        ? `In ${layer}, ${tier[0]} imports none of ${higher.join(", ")}: only the tiers below it.`
        : higher.length > 0
          ? `In ${layer}, ${tier.join(", ")} import neither each other nor ${higher.join(", ")}.`
          : `In ${layer}, ${tier.join(", ")} do not import each other.`;
    return [
      rule(`${layer}-${tier.join("-")}`, comment, { path: folders(tier) }, { path: folders([...tier, ...higher]), pathNot: "^shared/$1/" }),
    ];
  }),
);

/**
 * A folder of shared/ that LAYERS does not name is outside every rule above, so each of its modules is an error:
 * whether it imports something, is imported, or neither (an orphan).
 */
const unplacedRules = [
  rule(
    "shared-folder-in-a-layer",
    "Every folder of shared/ is in a layer of LAYERS (.dependency-cruiser.cjs); this module's folder is in none.",
    UNPLACED,
    {},
  ),
  rule(
    "shared-folder-in-a-layer-imported",
    "Every folder of shared/ is in a layer of LAYERS (.dependency-cruiser.cjs); this import reaches a folder in none.",
    {},
    UNPLACED,
  ),
  rule(
    "shared-folder-in-a-layer-orphan",
    "Every folder of shared/ is in a layer of LAYERS (.dependency-cruiser.cjs); this module's folder is in none.",
    { ...UNPLACED, orphan: true },
    {},
  ),
];

/**
 * No barrels: every import names the module that defines what it imports, so shared/ has no index.ts (a folder's
 * modules are named for what they hold). An index file is an error whether it imports, is imported or neither.
 * Re-exports (a same-name file passing on its neighbours' names) are forbidden too:
 * tests/structure/re-exports.unit.test.ts enforces that.
 */
const INDEX = { path: "^shared/(index|.*/index)[.][cm]?[jt]s$" };
const indexRules = [
  rule("no-index-file", "No index.ts in shared/: import the module that defines the thing (no barrels).", INDEX, {}),
  rule("no-index-file-imported", "No index.ts in shared/: import the module that defines the thing (no barrels).", {}, INDEX),
  rule("no-index-file-orphan", "No index.ts in shared/: name the module for what it holds.", { ...INDEX, orphan: true }, {}),
];

module.exports = {
  forbidden: [
    rule("no-circular", "No import cycle between files, type-only imports included.", {}, { circular: true }),
    rule(
      "no-tests-in-source",
      "Source never imports tests or benchmarks.",
      { path: "^(shared|functions|local)/" },
      { path: "^(tests|bench)/" },
    ),
    rule(
      "base-imports-base",
      "Loose files in shared/ are the base: they import no folder of shared/.",
      { path: BASE },
      { path: ANY_FOLDER },
    ),
    ...layerRules,
    ...tierRules,
    rule(
      "kinds-apart",
      "A kind file (kinds/nodes/*, kinds/triggers/*) imports no other kind: what kinds share lives in kinds/support/.",
      { path: "^shared/kinds/(nodes|triggers)/" },
      { path: "^shared/kinds/(nodes|triggers)/" },
    ),
    rule(
      "entry-points-apart",
      "functions/ and local/ are separate hosts: neither imports the other.",
      { path: ENTRY },
      { path: ENTRY, pathNot: "^$1/" },
    ),
    ...unplacedRules,
    ...indexRules,
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
