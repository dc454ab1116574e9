// `runner info`: what this build contains and where this process would sit in a job.
import os from "node:os";
import type { CommandModule } from "yargs";
import { cpuBinding, describeBinding } from "../../comm/host.js";
import { formatSize } from "../../config/size.js";
import { cpuModel, gpuList } from "../../env/devices.js";
import { VERSION } from "../../version.js";

const ALL_BACKENDS = ["shm", "tcp", "mpi", "nccl", "hccl"];

function gpus(): string {
  const found = gpuList();
  return found.length ? found.join(", ") : "none detected";
}

/**
 * How the shm backend would move large messages here: what its ranks agree at start-up, from this process's
 * view. From which size they move single-copy the ranks find by timing both paths then, so only the range.
 */
function shmCopyPath(allowed: (env: NodeJS.ProcessEnv) => boolean, timedHere: (env: NodeJS.ProcessEnv) => boolean, refusal: () => string, timed: number[], otherwise: number): string {
  let why: string;
  try {
    why = allowed(process.env) ? refusal() : "SPMD_SHM_SINGLE_COPY=0";
  } catch (err) {
    why = (err as Error).message;
  }
  if (why) return `staged (${why})`;
  if (!timedHere(process.env)) return `single-copy: cma (process_vm_readv/writev) from ${formatSize(otherwise)}, untimed (SPMD_SHM_SINGLE_COPY=fixed)`;
  const range = `${formatSize(timed[0]!)} to ${formatSize(timed.at(-1)!)} or ${formatSize(otherwise)}`;
  return `single-copy: cma (process_vm_readv/writev) from ${range}, as the ranks time it at start-up`;
}

export const infoCommand: CommandModule<object, object> = {
  command: "info",
  describe: "Print version, built backends, the place detected from the environment, CPUs and GPUs",
  builder: (yargs) =>
    yargs
      .example("$0 info", "on this machine")
      .example("mpirun -np 2 node runner info", "what each rank of an MPI launch would see"),
  handler: async () => {
    const [{ addonSource, native }, { describeLibrary }, { mpiNotBuiltNote, planStart }, { discoverPlace }] = await Promise.all([
      import("../../comm/native.js"), import("../../comm/vendor-library.js"), import("../../comm/open.js"), import("../../env/discover.js"),
    ]);
    const { backends: built, mpiLibrary, cudaKernels } = native();
    const place = discoverPlace(process.env);
    let auto: string;
    try {
      const plan = planStart({ requested: "auto", place, env: process.env, built, master: place.master ?? {} });
      const backend = plan.backend === "auto" ? "shm if all ranks share a host, else tcp between hosts (shm+tcp within)" : plan.backend;
      auto = `backend ${backend}, bootstrap ${plan.bootstrap}`;
    } catch (err) {
      auto = (err as Error).message;
    }
    const note = mpiNotBuiltNote(place, process.env, built);
    const { copyPathTimed, singleCopyAllowed } = await import("../../comm/start-shm.js");
    const addon = addonSource();
    const lines = [
      ...(note ? [note] : []),
      `spmd-runner ${VERSION} (node ${process.version}, ${os.platform()}-${os.arch()})`,
      `addon: ${addon.path} (${addon.origin})`,
      `backends: ${ALL_BACKENDS.map((b) => `${b}=${built.includes(b) ? "built" : "not built"}`).join(" ")}`,
      ...(mpiLibrary ? [`mpi: ${mpiLibrary.split("\n")[0]!.replace(/\s+/g, " ").trim()}`] : []),
      ...(["nccl", "hccl"] as const).filter((b) => built.includes(b)).map((b) => `${b}: ${describeLibrary(b, process.env)}`),
      `cuda kernels: ${cudaKernels ? `built for ${cudaKernels.archs} (${cudaKernels.bytes} bytes of fatbins)` : "not built (no nvcc at build time)"}`,
      `launcher: ${place.launcher}; rank ${place.rank} of ${place.size}; local rank ${place.localRank} of ${place.localSize}` +
        (place.nodeRank !== undefined ? `; node ${place.nodeRank}` : "") +
        (place.master ? `; master ${place.master.addr}:${place.master.port ?? "?"}` : ""),
      `auto: ${auto}`,
      `shm ${shmCopyPath(singleCopyAllowed, copyPathTimed, native().singleCopyRefusal, native().singleCopyTimedBytes, native().singleCopyFromBytes)}`,
      `host: ${os.hostname()}, ${os.cpus().length} CPUs (${cpuModel()}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
      `binding: ${describeBinding(cpuBinding())}`,
      `gpus: ${gpus()}`,
    ];
    console.log(lines.join("\n"));
  },
};
