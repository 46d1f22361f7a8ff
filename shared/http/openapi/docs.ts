/**
 * `GET /docs` (shared/service/openapi.ts): the HTML reference rendered from the OpenAPI document, a static
 * list of operations that an interactive reference replaces when JavaScript and the CDN are available.
 */
import { API_VERSION, type Json } from "./kit";

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

export function buildDocsPage(doc: Json): string {
  const info = doc.info as Json;
  const rows: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const auth = (op.security as unknown[]).length > 0 ? "bearer token" : "public";
      rows.push(
        `<li><code>${method.toUpperCase()} ${escapeHtml(path)}</code> — ${escapeHtml(String(op.summary))} <small>(${auth}; <code>${escapeHtml(String(op.operationId))}</code>)</small></li>`,
      );
    }
  }
  const title = `${escapeHtml(String(info.title))} ${escapeHtml(String(info.version))}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;line-height:1.5}code{font-size:.95em}li{margin:.25rem 0}</style>
</head>
<body>
<div id="app"></div>
<main id="fallback">
<h1>${title}</h1>
<p>Interface version ${API_VERSION}. The machine-readable description is <a href="./openapi.json">/openapi.json</a> (OpenAPI 3.1); an interactive reference loads here when JavaScript and the CDN are available.</p>
<h2>Operations</h2>
<ul>
${rows.join("\n")}
</ul>
</main>
<script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference@1"></script>
<script>
(function () {
  if (!window.Scalar || typeof window.Scalar.createApiReference !== "function") return;
  document.getElementById("fallback").hidden = true;
  window.Scalar.createApiReference("#app", { url: new URL("openapi.json", window.location.href).href });
})();
</script>
</body>
</html>
`;
}
