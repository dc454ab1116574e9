// `runner build`: (re)builds the native addon where none fits, or to pick up MPI or CUDA installed since.
import type { Argv, CommandModule } from "yargs";
import { BUILD_DIR } from "../../comm/native.js";

interface BuildArgs {
  out: string;
  target?: string;
  define: string[];
  sqlite: boolean;
}

export const buildCommand: CommandModule<object, BuildArgs> = {
  command: "build",
  describe: "Build the native addon from the package's sources (needs CMake and a C++ compiler), and the SQLite addon of `runner exp` where it does not load",
  builder: (yargs: Argv<object>) =>
    yargs
      .option("out", { type: "string", default: BUILD_DIR, defaultDescription: "native/build, or $SPMD_BUILD_DIR", describe: "CMake build directory" })
      .option("target", { type: "string", describe: "Build only this CMake target (spmd_native: the addon alone)" })
      .option("define", { alias: "D", type: "string", array: true, default: [], describe: "CMake cache entry NAME=VALUE" })
      .option("sqlite", { type: "boolean", default: false, describe: "Build only the SQLite addon (better-sqlite3) that `runner exp` uses" })
      .check((argv) => {
        const bad = argv.define.find((d) => !/^[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=/.test(d));
        if (bad !== undefined) {
          throw Object.assign(new Error(`--define ${bad}: expected NAME=VALUE (e.g. -D SPMD_CUDA=OFF)`), { exitCode: 2 });
        }
        return true;
      })
      .example("$0 build", "after installing the package, or after installing MPI or CUDA")
      .example("$0 build -D MPI_C_COMPILER=mpicc.mpich", "for MPICH where Open MPI is installed too")
      .example("$0 build -D SPMD_CUDA=OFF", "without the CUDA kernels even where nvcc is"),
  handler: async (argv) => {
    const [{ buildAddon }, { buildSqlite, sqliteLoads }] = await Promise.all([import("../../build/addon.js"), import("../../build/sqlite.js")]);
    const addon = argv.sqlite ? 0 : buildAddon({ out: argv.out, target: argv.target, defines: argv.define });
    process.exitCode = addon !== 0 ? addon : sqliteLoads() ? 0 : buildSqlite();
  },
};
