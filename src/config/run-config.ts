import * as z from "zod";
import { schemaRef } from "./job.js";

/** winston's npm levels that runs use, most severe first. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;

/** Everything about a run that is not the experiment itself; `{}` is a complete configuration. */
export const runConfigSchema = z.strictObject({
  $schema: schemaRef,
  backend: z
    .enum(["auto", "shm", "tcp", "shm+tcp", "mpi", "nccl", "hccl"])
    .default("auto")
    .describe('The communicator (--backend). For host memory "auto" is mpi under an MPI launcher, else shm on one host, else tcp between hosts and shm within each ("shm+tcp")'),
  timeoutSec: z
    .number()
    .positive()
    .optional()
    .describe("Overrides the job's own `timeoutSec` (stages that set their own keep it); --timeout overrides this"),
  connectTimeoutSec: z.number().positive().default(60).describe("Start-up deadline in seconds: the ranks meet and connect within it"),
  log: z
    .strictObject({
      level: z.enum(LOG_LEVELS).default("info").describe("The least severe level logged (--log-level)"),
      allRanks: z.boolean().default(false).describe("Log from every rank, not only rank 0 (--log-all-ranks)"),
      files: z.boolean().default(false).describe("Each rank also logs to rank<r>.log.jsonl in the run directory"),
    })
    .prefault({})
    .describe("What the ranks log, and where"),
  output: z
    .strictObject({
      dir: z.string().min(1).default("results").describe("The directory run directories are made in (--out)"),
      json: z.string().min(1).optional().describe("Also write the result JSON to this file (--json)"),
    })
    .prefault({})
    .describe("Where results go"),
  rendezvous: z
    .strictObject({
      addr: z.string().min(1).optional().describe("Rank 0's address; default MASTER_ADDR"),
      port: z.int().min(1).max(65535).optional().describe("The rendezvous port; default MASTER_PORT"),
    })
    .prefault({})
    .describe("The TCP rendezvous where the ranks meet at start-up, in place of MASTER_ADDR and MASTER_PORT"),
  tcp: z
    .strictObject({
      iface: z
        .string()
        .min(1)
        .optional()
        .describe('The interface tcp uses, like NCCL_SOCKET_IFNAME: name prefixes ("eth,ib"), "=eth0" exact, "^docker" excluded; or an IP address (--iface)'),
    })
    .prefault({})
    .describe("The tcp backend's settings"),
});

export type RunConfig = z.output<typeof runConfigSchema>;
export type Backend = RunConfig["backend"];
export type LogLevel = RunConfig["log"]["level"];
