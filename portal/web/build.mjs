// Builds the wallet's assets into the directory given (npm run build:
// ../dist, which is committed and embedded in the binary by package portal):
//   portal.html, portal.js, portal.css  the /portal page
//   wallet.html                         the MCP App, one self-contained document
// The output is deterministic, so a test can rebuild it and compare
// (portal/assets_test.go): a stale committed build fails.
import { build } from "esbuild";
import { mkdir, readFile, writeFile, copyFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] || path.join(here, "..", "dist"));
await mkdir(out, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  write: false,
  format: "esm",
  target: ["chrome120", "firefox120", "safari17"],
  legalComments: "eof",
  charset: "utf8",
  logLevel: "warning",
  outdir: out,
  absWorkingDir: here,
};

async function bundle(entry, name) {
  const res = await build({ ...common, entryPoints: { [name]: path.join(here, "src", entry) } });
  const files = {};
  for (const f of res.outputFiles) files[path.extname(f.path)] = f.text;
  return files;
}

const page = await bundle("portal.js", "portal");
await writeFile(path.join(out, "portal.js"), page[".js"]);
await writeFile(path.join(out, "portal.css"), page[".css"]);
await copyFile(path.join(here, "src", "portal.html"), path.join(out, "portal.html"));

// The MCP App is one document: hosts load it from a resources/read answer,
// with no origin to fetch assets from. "</script" never appears in a
// minified bundle's code, but is escaped in case a string holds it.
const app = await bundle("app.js", "wallet");
const template = await readFile(path.join(here, "src", "wallet.html"), "utf8");
const html = template
  .replace("/*STYLE*/", () => app[".css"].replaceAll("</style", "<\\/style"))
  .replace("/*SCRIPT*/", () => app[".js"].replaceAll("</script", "<\\/script"));
await writeFile(path.join(out, "wallet.html"), html);
console.log(`built ${out}: portal.html, portal.js (${page[".js"].length} B), portal.css, wallet.html (${html.length} B)`);
