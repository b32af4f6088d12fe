// Starts the published @smartbear/mcp with its annotation builder reporting only the hint keys each tool's
// specification sets. The package fills every hint a tool leaves unset with its own defaults (readOnly true,
// destructive false, idempotent true, openWorld false), so its plain tools/list cannot show what was declared.
// This changes nothing else: names, titles, descriptions and schemas are the package's own. Used only by
// harvest.py (see manifest.json); never by toolgate or its tests.
//
// Usage: node smartbear-explicit.mjs <path of the package's `mcp` bin> [server args...]
import { realpathSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const entry = realpathSync(process.argv[2]);
const root = path.dirname(path.dirname(entry));
const { SmartBearMcpServer } = await import(pathToFileURL(path.join(root, "dist/common/server.js")).href);
const keys = [
  ["readOnly", "readOnlyHint"],
  ["destructive", "destructiveHint"],
  ["idempotent", "idempotentHint"],
  ["openWorld", "openWorldHint"],
];
SmartBearMcpServer.prototype.getAnnotations = function (toolTitle, params) {
  const annotations = { title: toolTitle };
  for (const [param, hint] of keys) {
    if (params[param] !== undefined) annotations[hint] = params[param];
  }
  return annotations;
};
process.argv.splice(2, 1);
await import(pathToFileURL(entry).href);
