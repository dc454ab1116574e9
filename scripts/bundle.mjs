// The rank path as one file: dist/cli/index.js and everything it imports (our modules and the bundled
// dependencies) in dist/bundle/index.js, which runner/index.js runs. A rank then reads a handful of files
// instead of some 300 modules at start-up (the import storm a shared filesystem feels at 1000 ranks). Code
// imported on demand (a command's) stays in the file but runs only when imported; the charts, with vega
// and vega-lite, are a second file (dist/bundle/charts.js), loaded only by the one process that draws
// report.html: as some 280 modules they were also as many descriptors open at once, more than a rank
// under `ulimit -n 96` may hold. Part of `npm run build:ts`; the package ships the result.
import { build } from "esbuild";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const bundle = (entry, plugins) => build({
  entryPoints: [path.join(root, entry)],
  outdir: path.join(root, "dist/bundle"),
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // ES builds first: jsonc-parser's UMD main loads its parts with a require() that a bundle cannot follow.
  mainFields: ["module", "main"],
  // Bundled CommonJS dependencies (winston, yargs' helpers) call require() for Node's own modules.
  banner: { js: 'import { createRequire as spmdCreateRequire } from "node:module"; const require = spmdCreateRequire(import.meta.url);' },
  plugins,
  // Less to parse at every start; names stay, for stack traces and code that reads them.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  write: false,
});

const chartsApart = {
  name: "charts-apart",
  setup(b) {
    // dist/bundle/charts.js, beside the rank path's file.
    b.onResolve({ filter: /\/charts\.js$/ }, () => ({ path: "./charts.js", external: true }));
  },
};
const outputFiles = (await Promise.all([bundle("dist/cli/index.js", [chartsApart]), bundle("dist/report/charts.js", [])])).flatMap((r) => r.outputFiles);

// Written only when it changed, and by a rename: ranks start from this file, also while a rebuild runs
// (`npm pack` rebuilds during the tests), and must never read half of it.
for (const { path: file, contents } of outputFiles) {
  if (existsSync(file) && readFileSync(file).equals(contents)) continue;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, contents);
  renameSync(`${file}.tmp`, file);
}
