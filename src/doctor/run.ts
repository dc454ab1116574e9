// `runner doctor` as one rank: meet the others as a job does (any launcher, any host-memory backend), survey
// the hosts and links, and rank 0 reports the matrices (console, results.json, report.html).
import path from "node:path";
import { openCommunicator, type OpenCommunicator } from "../comm/open.js";
import type { RunConfig } from "../config/run-config.js";
import { discoverPlace, rankForMessages } from "../env/discover.js";
import type { Place } from "../env/place.js";
import { sayFailure } from "../log/failure.js";
import { createLogger, type Logger } from "../log/logger.js";
import { formatTable } from "../report/table.js";
import { writeFileAtomic } from "../report/write-atomic.js";
import type { DoctorNic, ResultDocument } from "../results.js";
import { jobSecret } from "../run/identity.js";
import { gatherHosts, manifest, packageRevision, startupFacts } from "../run/manifest.js";
import { resolveConfig, type RunRequest } from "../run/request.js";
import { createRunDir, writeResults } from "../run/write.js";
import { oversubscribed } from "../metrics/verdict.js";
import { VERSION } from "../version.js";
import { doctorResult, formatDoctor, referenceOf } from "./format.js";
import { measurer, type MeasureSettings } from "./measure.js";
import { hostNic } from "./nic.js";
import { survey } from "./schedule.js";

export interface DoctorRequest extends Omit<RunRequest, "job" | "check" | "dumpDir"> {
  /** Outliers are below this fraction of their reference. */
  threshold: number;
  /** The bandwidth message, bytes. */
  size: number;
  /** What every link should carry each way, GB/s: the reference for every link at once (else the NICs' speed). */
  expect?: number;
}

function settingsOf(r: DoctorRequest, timeoutSec: number): MeasureSettings {
  if (!(r.threshold > 0 && r.threshold < 1)) {
    throw Object.assign(new Error(`--threshold: expected a fraction between 0 and 1, got ${r.threshold}`), { exitCode: 2 });
  }
  if (r.expect !== undefined && !(Number.isFinite(r.expect) && r.expect > 0)) {
    throw Object.assign(new Error(`--expect: expected GB/s above 0, got ${r.expect}`), { exitCode: 2 });
  }
  if (!Number.isInteger(r.size) || r.size < 4 || r.size % 4 !== 0) {
    throw Object.assign(new Error(`--size: expected a multiple of 4 bytes, got ${r.size}`), { exitCode: 2 });
  }
  return { bytes: r.size, iterations: r.iterations ?? 5, warmup: r.warmup ?? 1, timeoutSec };
}

async function report(doc: ResultDocument, output: RunConfig["output"], quiet: boolean, log: Logger): Promise<void> {
  const runDir = createRunDir(output.dir, "doctor");
  const text = formatDoctor(doc.doctor!, doc.core_round_trip_ns);
  await writeResults(doc, formatTable(doc), runDir, output, 1);
  writeFileAtomic(path.join(runDir, "doctor.txt"), text);
  if (!quiet) process.stdout.write(text);
  log.info(`results in ${runDir}${output.json ? ` and ${output.json}` : ""}`);
}

/** Each host's NIC, as its lowest rank reads it. */
async function gatherNics(opened: OpenCommunicator, iface: string | undefined): Promise<(DoctorNic | null)[]> {
  const all = (await opened.bootstrap.allGather("doctor/nic", JSON.stringify(hostNic(iface)))).map((n) => JSON.parse(n) as DoctorNic | null);
  return opened.topology.hosts.map((h) => all[h.ranks[0]!]!);
}

async function diagnose(opened: OpenCommunicator, place: Place, r: DoctorRequest, s: MeasureSettings, iface: string | undefined): Promise<ResultDocument> {
  const { hosts } = opened.topology;
  const machines = await gatherHosts(opened.bootstrap);
  const crowded = oversubscribed({ topology: { hosts }, manifest: { hosts: machines } as ResultDocument["manifest"] });
  const reference = referenceOf(r.expect, await gatherNics(opened, iface));
  const intra = hosts.flatMap((h, i) => (h.ranks.length > 1 ? [i] : []));
  const measured = await survey(hosts.length, intra, measurer(opened.comm, hosts, s), r.threshold);
  return {
    version: VERSION, job: "doctor", world_size: place.size, backend: opened.comm.backend,
    topology: { hosts, ...(opened.topology.links && { links: opened.topology.links }) },
    ...startupFacts(opened.comm),
    results: [], average_bus_bandwidth: 0,
    manifest: manifest(opened.comm.backend, machines, { ...s, threshold: r.threshold, expect: r.expect ?? null, backend: r.backend ?? "auto" }, opened.secret),
    doctor: doctorResult(hosts.map((h) => h.name), measured, r.threshold, reference, crowded),
  };
}

/** doctor measures between ranks: alone it would print empty 1x1 matrices and pass. */
export function checkDoctorWorld(size: number): void {
  if (size < 2) {
    throw Object.assign(new Error(`doctor measures between ranks, so it needs 2 or more (got ${size}): runner launch -n 2 doctor, or under mpirun or srun`), { exitCode: 2 });
  }
}

/** Runs this process's rank of the survey; returns the exit code (1 when an outlier is found). */
export async function runDoctor(r: DoctorRequest): Promise<number> {
  const cfg = resolveConfig(r);
  const s = settingsOf(r, r.timeout ?? cfg.timeoutSec ?? 60);
  const place = discoverPlace(process.env);
  checkDoctorWorld(place.size);
  const log = createLogger({ rank: place.rank, level: cfg.log.level, allRanks: cfg.log.allRanks });
  if (place.rank === 0) packageRevision();
  const opened = await openCommunicator({
    place, backend: cfg.backend, secret: jobSecret({ name: "doctor" }, place.size),
    fingerprint: { version: VERSION, job: { doctor: s, threshold: r.threshold, expect: r.expect ?? null }, run: { backend: cfg.backend, connectTimeoutSec: cfg.connectTimeoutSec } },
    timeoutMs: cfg.connectTimeoutSec * 1000, addr: cfg.rendezvous.addr, port: cfg.rendezvous.port, iface: cfg.tcp.iface,
    debug: (line) => log.debug(line),
  });
  log.debug(opened.summary);
  for (const w of opened.warnings) log.warn(w);
  let failed = true;
  try {
    const doc = await diagnose(opened, place, r, s, cfg.tcp.iface);
    if (place.rank === 0) await report(doc, cfg.output, r.quiet ?? false, log);
    failed = false;
    return doc.doctor!.outliers.length > 0 ? 1 : 0;
  } catch (err) {
    // Said before closing, as a job's rank does (run/rank.ts): the launcher's SIGTERM may end a slow close.
    sayFailure(err, rankForMessages(process.env));
    throw err;
  } finally {
    await opened.close(failed);
    await log.close();
  }
}
