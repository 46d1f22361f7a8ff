/**
 * Import rules (README.md "Architecture"): imports run one way, bottom to top
 *
 *   base      shared/*.ts (config, runtime, log, errors, context, address; pure: templates, json-text)
 *   adapters  shared/store, shared/keys → shared/chain
 *   http      shared/http (the HTTP kit: app factory, declarations, validation, paging, problems; no domain)
 *   domain    shared/{auth,secret,wallet,token} → kinds → workflow → engine → execution → {schedule,watch}
 *   service   shared/service (the composition root: every group, health, the OpenAPI document, wiring)
 *   entry     functions/, local/
 *
 * A module imports only its own layer's modules (without cycles) and the layers below it; inside the adapters and
 * the domain only along the arrows above, so folders form no cycle either. Type-only imports count
 * (tsPreCompilationDeps). No known violations are kept: every rule holds for the whole tree. `npm run deps` also
 * cruises tests/ and bench/, where only the cycle rule applies.
 */
const DOMAIN = "^shared/(auth|secret|wallet|token|kinds|workflow|engine|execution|schedule|watch)/";
const layer = (name, comment, from, to) => ({ name, comment, severity: "error", from: { path: from }, to: { path: to } });

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No import cycle between files, type-only imports included.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-tests-in-source",
      comment: "Source never imports tests or benchmarks.",
      severity: "error",
      from: { path: "^(shared|functions|local)/" },
      to: { path: "^(tests|bench)/" },
    },
    layer(
      "base-imports-base",
      "Loose files in shared/ are the base: they import no folder of shared/.",
      "^shared/[^/]+$",
      "^shared/[^/]+/",
    ),
    {
      name: "adapters-store-keys",
      comment: "store and keys import no other adapter (chain may use keys and store).",
      severity: "error",
      from: { path: "^shared/(store|keys)/" },
      to: { path: "^shared/(store|keys|chain)/", pathNot: "^shared/$1/" },
    },
    {
      name: "entry-points-apart",
      comment: "functions/ and local/ are separate hosts: neither imports the other.",
      severity: "error",
      from: { path: "^(functions|local)/" },
      to: { path: "^(functions|local)/", pathNot: "^$1/" },
    },
    layer(
      "adapters-below-http",
      "Adapters import only the base and each other.",
      "^shared/(store|keys|chain)/",
      `^shared/(http|service)/|${DOMAIN}|^(functions|local)/`,
    ),
    layer(
      "http-below-domain",
      "The HTTP kit knows no domain module, no composition, no entry point.",
      "^shared/http/",
      `^shared/service/|${DOMAIN}|^(functions|local)/`,
    ),
    layer(
      "domain-below-service",
      "Domain modules never import the composition root or an entry point.",
      DOMAIN,
      "^shared/service/|^(functions|local)/",
    ),
    layer("service-below-entry", "The composition root never imports an entry point.", "^shared/service/", "^(functions|local)/"),
    {
      name: "domain-auth-secret-wallet",
      comment: "auth, secret, wallet and token are the domain's bottom: they import no other domain folder.",
      severity: "error",
      from: { path: "^shared/(auth|secret|wallet|token)/" },
      to: { path: DOMAIN, pathNot: "^shared/$1/" },
    },
    layer(
      "domain-kinds",
      "The node and trigger kinds import auth, secret, wallet, token only.",
      "^shared/kinds/",
      "^shared/(workflow|engine|execution|schedule|watch)/",
    ),
    layer(
      "domain-workflow",
      "workflow imports kinds, auth, secret, wallet, token only.",
      "^shared/workflow/",
      "^shared/(engine|execution|schedule|watch)/",
    ),
    layer("domain-engine", "engine imports workflow and below only.", "^shared/engine/", "^shared/(execution|schedule|watch)/"),
    layer("domain-execution", "execution imports engine and below only.", "^shared/execution/", "^shared/(schedule|watch)/"),
    {
      name: "domain-schedule-watch",
      comment: "schedule and watch are the domain's top; neither imports the other.",
      severity: "error",
      from: { path: "^shared/(schedule|watch)/" },
      to: { path: "^shared/(schedule|watch)/", pathNot: "^shared/$1/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
