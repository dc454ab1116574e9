import * as z from "zod";

/** winston's npm levels that runs use, most severe first. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;

/** Everything about a run that is not the experiment itself; `{}` is a complete configuration. */
export const runConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  backend: z.enum(["auto", "shm", "tcp", "shm+tcp", "mpi", "nccl", "hccl"]).default("auto"),
  /** Overrides the job's own `timeoutSec` (stages that set their own keep it); --timeout overrides this. */
  timeoutSec: z.number().positive().optional(),
  connectTimeoutSec: z.number().positive().default(60),
  log: z
    .strictObject({
      level: z.enum(LOG_LEVELS).default("info"),
      allRanks: z.boolean().default(false),
      files: z.boolean().default(false),
    })
    .prefault({}),
  output: z
    .strictObject({
      dir: z.string().min(1).default("results"),
      json: z.string().min(1).optional(),
    })
    .prefault({}),
  rendezvous: z
    .strictObject({
      addr: z.string().min(1).optional(),
      port: z.int().min(1).max(65535).optional(),
    })
    .prefault({}),
  tcp: z
    .strictObject({
      // Like NCCL_SOCKET_IFNAME: interface-name prefixes ("eth,ib"), "=eth0" exact, "^docker" excluded; or an IP address.
      iface: z.string().min(1).optional(),
    })
    .prefault({}),
});

export type RunConfig = z.output<typeof runConfigSchema>;
export type Backend = RunConfig["backend"];
export type LogLevel = RunConfig["log"]["level"];
