// The rank path as one file: dist/cli/index.js and everything it imports (our modules and the bundled
// dependencies) in dist/bundle/index.cjs, which runner/index.js runs (runner/bundle.js). A rank then reads a
// handful of files instead of some 300 modules at start-up (the import storm a shared filesystem feels at
// 1000 ranks). Code imported on demand (a command's) stays in the file but runs only when imported; the
// charts, with vega and vega-lite, are a second file (dist/bundle/charts.cjs), loaded only by the one process
// that draws report.html: as some 280 modules they were also as many descriptors open at once, more than a
// rank under `ulimit -n 96` may hold. Both are CommonJS so that the rank path can run from V8's code cache,
// which this script writes last (index.cjs.v8cache). Part of `npm run build:ts`; the package ships the result.
import { build } from "esbuild";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const bundle = (entry, plugins) => build({
  entryPoints: [path.join(root, entry)],
  outdir: path.join(root, "dist/bundle"),
  outExtension: { ".js": ".cjs" },
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  // ES builds first: jsonc-parser's UMD main loads its parts with a require() that a bundle cannot follow.
  mainFields: ["module", "main"],
  // Our modules find the package and the addon from their own URL: the bundle's, in CommonJS.
  define: { "import.meta.url": "spmdModuleUrl" },
  inject: [path.join(root, "scripts/import-meta-url.js")],
  // import() of the charts becomes require(): code compiled from a cache (vm.Script) has no import().
  supported: { "dynamic-import": false },
  // A native addon that finds its .node file from its own folder: required from node_modules, by `runner exp` only.
  external: ["better-sqlite3"],
  plugins,
  // Less to parse at every start; names stay, for stack traces and code that reads them.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  write: false,
});

const lazyStringWidth = {
  name: "lazy-string-width",
  setup(b) {
    // yargs' help layout (cliui, wrap-ansi) imports string-width, which makes an Intl.Segmenter at its top
    // level: ICU's break rules, some 25 ms of CPU at every rank's start, for widths that only --help and
    // errors measure. Each import of string-width gets a stand-in that loads the real one at its first call.
    // The stand-in is CommonJS exporting the function itself, as string-width 4 does: cli-progress calls what
    // require() returns, while an ES importer's default of a CommonJS module is that same function. The real
    // one is string-width 4 (the function, with itself as .default) or 7+ (ES, .default).
    b.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData === "real") return undefined;
      const real = await b.resolve(args.path, { resolveDir: args.resolveDir, kind: args.kind, pluginData: "real" });
      return real.errors.length ? real : { path: real.path, namespace: "lazy-string-width" };
    });
    b.onLoad({ filter: /.*/, namespace: "lazy-string-width" }, (args) => ({
      contents: `let width; module.exports = (...a) => (width ??= require(${JSON.stringify(args.path)}).default)(...a);`,
      loader: "js",
      resolveDir: path.dirname(args.path),
    }));
  },
};

const chartsApart = {
  name: "charts-apart",
  setup(b) {
    // dist/bundle/charts.cjs, beside the rank path's file.
    b.onResolve({ filter: /\/charts\.js$/ }, () => ({ path: "./charts.cjs", external: true }));
  },
};
const withoutNodeCanvas = {
  name: "without-node-canvas",
  setup(b) {
    // vega-canvas's Node build awaits import("canvas") at its top level, which CommonJS cannot hold. The
    // charts are SVG, and without the optional canvas package (which we do not install) that build finds no
    // canvas either: its browser build behaves the same here, with no await.
    b.onResolve({ filter: /^vega-canvas$/ }, () => ({ path: path.join(root, "node_modules/vega-canvas/build/vega-canvas.browser.js") }));
  },
};
const outputFiles = (await Promise.all([bundle("dist/cli/index.js", [chartsApart, lazyStringWidth]), bundle("dist/report/charts.js", [withoutNodeCanvas])]))
  .flatMap((r) => r.outputFiles);

// Written only when it changed, and by a rename: ranks start from this file, also while a rebuild runs
// (`npm pack` rebuilds during the tests), and must never read half of it.
for (const { path: file, contents } of outputFiles) {
  if (existsSync(file) && readFileSync(file).equals(contents)) continue;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, contents);
  renameSync(`${file}.tmp`, file);
}

// The code cache ranks compile the bundle from, made by this Node (another V8 rejects it and compiles from
// source). V8 caches the functions compiled so far: loading the bundle compiles its modules' initialisation,
// and validating the quickstart job (its line not printed) what every rank's start runs, the command line
// and the job's schema. Without -n: a world's memory check could refuse the job on a small build machine.
const { loadBundle } = await import("../runner/bundle.js");
const loaded = loadBundle();
if (!loaded.cached) {
  const log = console.log;
  console.log = () => {};
  await loaded.exports.main(["validate", path.join(root, "jobs/quickstart.json")]);
  console.log = log;
  loaded.saveCache();
}
