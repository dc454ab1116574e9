// The rank path as one file: dist/cli/index.js and everything it imports (our modules and the bundled
// dependencies) in dist/bundle/index.js, which runner/index.js runs. A rank then reads a handful of files
// instead of some 300 modules at start-up (the import storm a shared filesystem feels at 1000 ranks). Code
// imported on demand (a command's) stays in the file but runs only when imported; the charts stay outside
// it (dist/report/charts.js, with vega and vega-lite from node_modules), loaded by the one process that
// draws report.html. Part of `npm run build:ts`; the package ships the result.
import { build } from "esbuild";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const { outputFiles } = await build({
  entryPoints: [path.join(root, "dist/cli/index.js")],
  outdir: path.join(root, "dist/bundle"),
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // ES builds first: jsonc-parser's UMD main loads its parts with a require() that a bundle cannot follow.
  mainFields: ["module", "main"],
  // Bundled CommonJS dependencies (winston, yargs' helpers) call require() for Node's own modules.
  banner: { js: 'import { createRequire as spmdCreateRequire } from "node:module"; const require = spmdCreateRequire(import.meta.url);' },
  plugins: [
    {
      name: "charts-outside",
      setup(b) {
        // From dist/bundle/index.js, the tsc-built module beside the others in dist/.
        b.onResolve({ filter: /\/charts\.js$/ }, () => ({ path: "../report/charts.js", external: true }));
      },
    },
  ],
  // Less to parse at every start; names stay, for stack traces and code that reads them.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  write: false,
});

// Written only when it changed, and by a rename: ranks start from this file, also while a rebuild runs
// (`npm pack` rebuilds during the tests), and must never read half of it.
for (const { path: file, contents } of outputFiles) {
  if (existsSync(file) && readFileSync(file).equals(contents)) continue;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, contents);
  renameSync(`${file}.tmp`, file);
}
