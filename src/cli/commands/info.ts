// `runner info`: what this build contains and where this process would sit in a job.
import os from "node:os";
import type { CommandModule } from "yargs";
import { native } from "../../comm/native.js";
import { discoverPlace } from "../../env/discover.js";
import { VERSION } from "../../version.js";

const ALL_BACKENDS = ["shm", "tcp", "mpi", "nccl", "hccl"];

export const infoCommand: CommandModule<object, object> = {
  command: "info",
  describe: "Print version, built backends and the place detected from the environment",
  handler: () => {
    const built = native().backends;
    const place = discoverPlace(process.env);
    const lines = [
      `spmd-runner ${VERSION} (node ${process.version}, ${os.platform()}-${os.arch()})`,
      `backends: ${ALL_BACKENDS.map((b) => `${b}=${built.includes(b) ? "built" : "not built"}`).join(" ")}`,
      `launcher: ${place.launcher}; rank ${place.rank} of ${place.size}; local rank ${place.localRank} of ${place.localSize}; node ${place.nodeRank}` +
        (place.master ? `; master ${place.master.addr}:${place.master.port ?? "?"}` : ""),
      `host: ${os.hostname()}, ${os.availableParallelism()} CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    ];
    console.log(lines.join("\n"));
  },
};
