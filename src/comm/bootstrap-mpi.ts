// The bootstrap over MPI: MPI_Init_thread on the MPI thread of the native runtime, which the mpi backend's
// communicator later runs on too. It owns MPI's end as well: MPI_Finalize when it closes, and on any
// other way out of the process (an error thrown past close, a signal, process.exit), where it first
// interrupts whatever op is still waiting; MPI_Abort only when finalizing is impossible.
import type { Place } from "../env/place.js";
import type { Bootstrap } from "./bootstrap.js";
import { BackendError } from "./errors.js";
import { native, type MpiWorld, type NativeMpiBootstrap } from "./native.js";
import { StartupTimeout, withinDeadline } from "./startup.js";

export interface MpiBootstrapOptions {
  place: Place;
  timeoutMs: number;
  /** Ask MPI only for MPI_THREAD_FUNNELED: one lane, igather posted on it. */
  funneled: boolean;
}

// At process exit other ranks are ending too; finalize waits this long for them before MPI_Abort.
const EXIT_FINALIZE_MS = 10_000;

export class MpiBootstrap implements Bootstrap {
  readonly kind = "mpi";
  /**
   * "stranded": a failed op left requests MPI_Finalize cannot run with; the exit ends the job instead.
   * "stuck": start-up passed its deadline inside MPI, whose thread may never come back: the process just
   * exits, and the launcher ends the ranks still waiting.
   */
  private state: "up" | "finalized" | "stranded" | "stuck" = "up";
  private readonly onExit = (code: number) => {
    if (this.state === "stuck") return;
    if (this.state === "up" && this.mpi.finalize(EXIT_FINALIZE_MS, "the process is exiting")) return;
    this.mpi.abort(code || 1);
  };

  /** What MPI_Init_thread granted; set once open() returns. */
  world!: MpiWorld;

  private constructor(
    readonly mpi: NativeMpiBootstrap,
    private readonly timeoutMs: number,
  ) {
    process.once("exit", this.onExit);
  }

  static async open(o: MpiBootstrapOptions): Promise<MpiBootstrap> {
    const Mpi = native().MpiBootstrap;
    if (!Mpi) throw new Error("bootstrap: the MPI backend is not built into this addon");
    const boot = new MpiBootstrap(new Mpi(), o.timeoutMs);
    try {
      boot.world = await withinDeadline(o.timeoutMs, () => boot.mpi.init({ localRanks: o.place.localSize, funneled: o.funneled }), async () => boot.late());
      checkWorld(boot.world, o.place);
    } catch (err) {
      await boot.close();
      throw err;
    }
    return boot;
  }

  /** MPI's start-up passed the deadline: which call it waits in. MPI cannot say for whom until it is up. */
  private late(): StartupTimeout {
    this.state = "stuck";
    const step = this.mpi.startupStep();
    const whom = step === "MPI_Init_thread" ? "a rank the launcher started has not reached MPI_Init (stopped, wedged, or still starting)" : "a rank stopped inside MPI's start-up";
    return new StartupTimeout(`mpi: ${step} did not finish within ${this.timeoutMs / 1000} s; MPI names no missing rank before it is up: ${whom}`);
  }

  allGather(_key: string, value: string): Promise<string[]> {
    return this.mpi.allGather(value, this.timeoutMs);
  }

  broadcast(_key: string, value: string | undefined): Promise<string> {
    return this.mpi.broadcast(value, this.timeoutMs);
  }

  barrier(): Promise<void> {
    return this.mpi.barrier(this.timeoutMs);
  }

  async close(): Promise<void> {
    if (this.state !== "up") return;
    if (this.mpi.finalize(this.timeoutMs)) {
      this.state = "finalized";
      process.off("exit", this.onExit);
    } else {
      // MPI_Abort now would kill the job before this rank reports why it failed; the exit does it.
      this.state = "stranded";
    }
  }
}

/** How to build the addon for the MPI of a launcher (docs/mpi.md), by the launcher found. */
const BUILD_FOR: Partial<Record<Place["launcher"], string>> = {
  mpich: "MPICH: SPMD_BUILD_DIR=native/build-mpich node runner build -D MPI_C_COMPILER=mpicc.mpich, then run with SPMD_BUILD_DIR=native/build-mpich set",
  openmpi: "Open MPI: SPMD_BUILD_DIR=native/build-openmpi node runner build -D MPI_C_COMPILER=mpicc.openmpi, then run with SPMD_BUILD_DIR=native/build-openmpi set",
};

function checkWorld(world: MpiWorld, place: Place): void {
  if (world.rank === place.rank && world.size === place.size) return;
  const says = `bootstrap: MPI says rank ${world.rank} of ${world.size}, the launcher's environment rank ${place.rank} of ${place.size}`;
  // Every rank alone in a world of 1: the addon's MPI did not understand this launcher, another MPI's.
  if (world.size === 1 && place.size > 1) {
    const library = native().mpiLibrary?.split(/[,\n]/)[0]?.trim() ?? "another MPI";
    const build = BUILD_FOR[place.launcher];
    throw new BackendError(`${says}: this addon was built for ${library}, not for the MPI of this launcher (${place.launcher})${build ? `; build one for ${build}` : ""}`);
  }
  throw new BackendError(says);
}
