// Builds the wallet's assets into the directory given (npm run build:
// ../dist, which is committed and embedded in the binary by package portal):
//   portal.html, portal.js, portal.css  the /portal page
//   wallet.html                         the MCP App, one self-contained document
// Both documents come from one template, src/page.html, minified like the
// bundles (the white space between its tags is dropped).
// The output is deterministic, so a test can rebuild it and compare
// (portal/assets_test.go): a stale committed build fails.
import { build } from "esbuild";
import { mkdir, readFile, writeFile } from "node:fs/promises";
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

// The template's placeholders take what each document loads: <!--HEAD-->
// ends the head, <!--BODY--> ends the body.
const template = (await readFile(path.join(here, "src", "page.html"), "utf8")).replace(/>\s+</g, "><").trim() + "\n";
const page = (head, body) => template.replace("<!--HEAD-->", () => head).replace("<!--BODY-->", () => body);

const portal = await bundle("portal.js", "portal");
await writeFile(path.join(out, "portal.js"), portal[".js"]);
await writeFile(path.join(out, "portal.css"), portal[".css"]);
await writeFile(
  path.join(out, "portal.html"),
  page('<link rel="stylesheet" href="/portal/assets/portal.css"><script type="module" src="/portal/assets/portal.js"></script>', ""),
);

// The MCP App is one document: hosts load it from a resources/read answer,
// with no origin to fetch assets from. "</script" never appears in a
// minified bundle's code, but is escaped in case a string holds it.
const app = await bundle("app.js", "wallet");
const html = page(
  `<style>${app[".css"].replaceAll("</style", "<\\/style")}</style>`,
  `<script type="module">${app[".js"].replaceAll("</script", "<\\/script")}</script>`,
);
await writeFile(path.join(out, "wallet.html"), html);
console.log(`built ${out}: portal.html, portal.js (${portal[".js"].length} B), portal.css, wallet.html (${html.length} B)`);
