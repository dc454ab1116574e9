// results.json's manifest: what a run depended on, so that `runner compare` can say why two runs differ.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Bootstrap } from "../comm/bootstrap.js";
import { native, type NativeCommunicator } from "../comm/native.js";
import { PACKAGE_ROOT } from "../version.js";
import { libraryVersion } from "../comm/vendor-library.js";
import { cpuModel, gpuList } from "../env/devices.js";
import { recordedEnv } from "../env/recorded.js";
import type { Manifest, ResultDocument, SecretSource } from "../results.js";
import { VERSION } from "../version.js";

let revision: string | null | undefined;

/**
 * The package's git revision, asked of git once per process. Rank 0 asks before the ranks meet: spawning
 * git opens a few descriptors, and after the rendezvous rank 0 holds a store connection per rank, so late
 * in a large run under a tight `ulimit -n` the spawn failed and the manifest lost its revision.
 */
export function packageRevision(): string | null {
  if (revision !== undefined) return revision;
  if (!existsSync(path.join(PACKAGE_ROOT, ".git"))) return (revision = null);
  const p = spawnSync("git", ["describe", "--always", "--dirty", "--abbrev=40"], { cwd: PACKAGE_ROOT, encoding: "utf8", timeout: 5000 });
  return (revision = p.status === 0 ? p.stdout.trim() : null);
}

export const firstLine = (s: string) => s.split("\n")[0]!.replace(/\s+/g, " ").trim();

function libraryOf(backend: string, env: NodeJS.ProcessEnv): string | null {
  const { mpiLibrary } = native();
  if (backend.startsWith("mpi")) return mpiLibrary ? firstLine(mpiLibrary) : null;
  if (backend === "nccl" || backend === "hccl") return libraryVersion(backend, env);
  return null;
}

/** Every rank says what its host holds; the hosts, once each, in rank order. */
export async function gatherHosts(boot: Bootstrap): Promise<Manifest["hosts"]> {
  const mine = JSON.stringify({ name: os.hostname(), cpu: cpuModel(), cores: os.availableParallelism(), gpus: gpuList() });
  // Alike as the ranks wrote them, so a Set finds the repeats (one rank per host would make a search W²).
  return [...new Set(await boot.allGather("manifest/host", mine))].map((s) => JSON.parse(s) as Manifest["hosts"][number]);
}

/** What the communicator's start-up found about the machine, as results.json records it (copy_path, core_round_trip_ns). */
export function startupFacts(comm: Pick<NativeCommunicator, "copyPath" | "coreRoundTrips">): Pick<ResultDocument, "copy_path" | "core_round_trip_ns"> {
  return {
    ...(comm.copyPath && { copy_path: comm.copyPath }),
    ...(comm.coreRoundTrips.length && { core_round_trip_ns: comm.coreRoundTrips.map((ns) => Number(ns.toFixed(1))) }),
  };
}

export function manifest(backend: string, hosts: Manifest["hosts"], settings: Record<string, unknown>, secret: SecretSource, env = process.env): Manifest {
  const { mpiLibrary, cudaKernels } = native();
  return {
    runner: VERSION,
    git: packageRevision(),
    node: process.version,
    addon: { mpi: mpiLibrary ? firstLine(mpiLibrary) : null, cuda: cudaKernels ? cudaKernels.archs : false },
    library: libraryOf(backend, env),
    env: recordedEnv(env),
    settings,
    hosts,
    rendezvous_secret: secret,
  };
}
