#!/usr/bin/env node
// tcp against iperf3: how close the tcp backend's 16 MiB allreduce comes to the link it runs on, beside Open
// MPI's btl tcp in the same setting (docs/PERFORMANCE.md, "tcp against iperf3"). Needs root: the hosts are
// network namespaces (test/helpers/netns.js).
//   loopback  2 ranks in one host, --backend tcp (every byte crosses the host's loopback)
//   veth      1 rank on each of 2 hosts joined by veth pairs and a bridge
//   tbf       the same with each host's egress shaped to 1 Gbit/s (tbf, burst 256 kB, latency 50 ms)
//   hybrid    2 ranks on each of 2 hosts over veth: shm inside a host, tcp across (Open MPI: vader + tcp)
// For each, in alternating rounds: iperf3 --bidir's rate in each direction (the mean of the two), our
// allreduce's busbw (bytes each link carries per direction / time) and Open MPI's, and the ratios; medians
// of the rounds. A 2-core machine is CPU-bound in all of them but tbf, so only ratios within a run mean much.
//   node bench/tcp.mjs [--links loopback,veth,tbf,hybrid] [--rounds 3] [--iterations 20] [--warmup 5]
//                      [--seconds 4] [--also DIR]   (--also: another checkout's runner, measured alongside)
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { inHost, netnsUnavailable, openMpi, placeRanks, withHosts } from "../test/helpers/netns.js";
import { buildTools, OMPI_COLL, runProcess } from "./lib/peers.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BYTES = 16 * 2 ** 20;
const NICE = ["nice", "-n", "-19"];

const LINKS = {
  loopback: { hosts: 1, placement: [0, 0], backend: "tcp" },
  veth: { hosts: 2, placement: [0, 1], backend: "tcp" },
  tbf: { hosts: 2, placement: [0, 1], backend: "tcp", shape: { rate: "1gbit" } },
  // Open MPI gets its shared memory inside a host too.
  hybrid: { hosts: 2, placement: [0, 0, 1, 1], backend: "auto", btl: "tcp,vader,self" },
};

function check(p, what) {
  if (p.code !== 0) throw new Error(`${what} exited ${p.code}: ${(p.stderr || p.stdout).trim().split("\n").slice(-3).join(" | ")}`);
  return p;
}

const inNs = (host, argv) => ["ip", "netns", "exec", host.ns, ...NICE, ...argv];
const run = ([program, ...args]) => runProcess(program, args, { timeoutMs: 300_000 });

/** iperf3 --bidir between the first and the last host (the only one for loopback): bytes/s each way. */
async function iperf(hosts, seconds) {
  const server = hosts.at(-1), port = "5299";
  const s = spawn("ip", ["netns", "exec", server.ns, ...NICE, "iperf3", "-s", "-1", "-p", port], { stdio: "ignore" });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const p = check(await run(inNs(hosts[0], ["iperf3", "-c", server.ipv4, "-p", port, "--bidir", "-t", String(seconds), "-J"])), "iperf3");
    const end = JSON.parse(p.stdout).end;
    return [end.sum_received.bits_per_second, end.sum_received_bidir_reverse.bits_per_second].map((b) => b / 8);
  } finally {
    s.kill();
  }
}

/** Our runner (`repo`'s) on the link: the allreduce's average time per iteration, µs. */
async function ours(link, hosts, dir, repo, o) {
  const job = path.join(dir, "job.json");
  writeFileSync(job, JSON.stringify({
    name: "tcp-bench", iterations: o.iterations, warmup: o.warmup, check: false, timeoutSec: 120,
    tensors: { t: { dtype: "float32", count: BYTES / 4 } },
    stages: [{ id: "ar", op: "allreduce", input: "t", reduce: "sum" }],
  }));
  const out = mkdtempSync(path.join(dir, "out-"));
  const args = [job, "--backend", link.backend, "--out", out, "--quiet"];
  // Each rank's own variables (RANK, MASTER_ADDR...) through env(1): runProcess passes on only the harness's.
  const own = placeRanks(hosts, link.placement).map((env) => Object.entries(env).filter(([k, v]) => process.env[k] !== v).map(([k, v]) => `${k}=${v}`));
  const ranks = await Promise.all(link.placement.map((h, r) => run(inNs(hosts[h], ["env", ...own[r], process.execPath, path.join(repo, "runner"), ...args]))));
  ranks.forEach((p, r) => check(p, `rank ${r}`));
  const doc = JSON.parse(readFileSync(path.join(out, readdirSync(out)[0], "results.json"), "utf8"));
  rmSync(out, { recursive: true, force: true });
  return doc.results.find((row) => row.stage === "ar").time.avg_us;
}

/** Open MPI's MPI_Allreduce (bench/ompi_coll.c) under mpirun in the first host: average µs. */
async function ompi(link, hosts, dir, o) {
  const slots = hosts.map((_, i) => link.placement.filter((h) => h === i).length);
  const W = link.placement.length;
  // Ranks fill a host before the next, as ours are placed.
  const mpirun = openMpi({ slots, mapBy: "slot" })(hosts, dir, W).map((a) => (a === "tcp,self" && link.btl ? link.btl : a));
  const p = check(await run(inHost(hosts[0], [...NICE, ...mpirun, OMPI_COLL, String(o.warmup), String(o.iterations), `allreduce:${BYTES / 4}`])), "mpirun");
  const doc = JSON.parse(p.stdout.trim().split("\n").reverse().find((l) => l.startsWith("{")));
  return doc.results[0].time.avg_us;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

/**
 * Measures the links named; returns one row per link: { link, iperf (bytes/s each way), ours, also, ompi
 * (busbw, bytes/s) }, each the median of the rounds.
 */
export async function measureTcp({ links = ["loopback", "veth", "tbf", "hybrid"], rounds = 3, iterations = 20, warmup = 5, seconds = 4, also } = {}) {
  buildTools();
  const o = { iterations, warmup };
  const rows = [];
  for (const name of links) {
    const link = LINKS[name];
    if (!link) throw new Error(`bench/tcp: no link "${name}" (one of ${Object.keys(LINKS).join(", ")})`);
    const W = link.placement.length;
    const busbw = (us) => (2 * (W - 1) / W) * BYTES / (us / 1e6);
    const got = { iperf: [], ours: [], also: [], ompi: [] };
    await withHosts(link.hosts, async (hosts) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "tcp-bench-"));
      try {
        for (let i = 0; i < rounds; ++i) {
          const [a, b] = await iperf(hosts, seconds);
          got.iperf.push((a + b) / 2);
          // Alternating which runner goes first, so neither always meets a machine the other just warmed.
          const runners = also ? (i % 2 ? [["also", also], ["ours", REPO]] : [["ours", REPO], ["also", also]]) : [["ours", REPO]];
          for (const [key, repo] of runners) got[key].push(busbw(await ours(link, hosts, dir, repo, o)));
          got.ompi.push(busbw(await ompi(link, hosts, dir, o)));
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, { ipv6: false, shape: link.shape });
    rows.push({ link: name, W, ...Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v.length ? median(v) : undefined])), rounds: got });
  }
  return rows;
}

/** The Markdown table of measureTcp's rows (GB/s = 1e9 bytes/s). */
export function tcpTable(rows, { alsoName = "also" } = {}) {
  const gb = (x) => (x / 1e9).toFixed(3);
  const also = rows.some((r) => r.also !== undefined);
  const head = ["link", "ranks", "iperf3 --bidir per direction (GB/s)", "ours busbw (GB/s)", ...(also ? [`${alsoName} busbw (GB/s)`] : []),
    "Open MPI busbw (GB/s)", "ours / iperf3", "ours / Open MPI", ...(also ? [`${alsoName} / iperf3`, `${alsoName} / Open MPI`] : [])];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i < 2 ? "---" : "---:")).join("|")}|`];
  for (const r of rows) {
    const cells = [r.link, r.link === "hybrid" ? "2 hosts × 2" : r.link === "loopback" ? "2 on 1 host" : "2 hosts × 1", gb(r.iperf), gb(r.ours),
      ...(also ? [gb(r.also)] : []), gb(r.ompi), (r.ours / r.iperf).toFixed(2), (r.ours / r.ompi).toFixed(2),
      ...(also ? [(r.also / r.iperf).toFixed(2), (r.also / r.ompi).toFixed(2)] : [])];
    lines.push(`| ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      links: { type: "string", default: "loopback,veth,tbf,hybrid" }, rounds: { type: "string", default: "3" },
      iterations: { type: "string", default: "20" }, warmup: { type: "string", default: "5" }, seconds: { type: "string", default: "4" },
      also: { type: "string" }, json: { type: "boolean", default: false },
    },
  });
  const missing = netnsUnavailable();
  if (missing) {
    console.error(`bench/tcp: ${missing}`);
    process.exit(2);
  }
  try {
    const rows = await measureTcp({
      links: values.links.split(","), rounds: Number(values.rounds), iterations: Number(values.iterations), warmup: Number(values.warmup),
      seconds: Number(values.seconds), also: values.also && path.resolve(values.also),
    });
    console.log(`16 MiB float32 allreduce (sum), median of ${values.rounds} alternating rounds; load at end ${os.loadavg().map((v) => v.toFixed(2)).join(" ")}\n`);
    console.log(tcpTable(rows, { alsoName: values.also && path.basename(path.resolve(values.also)) }));
    if (values.json) console.log(JSON.stringify(rows));
  } catch (err) {
    console.error(`bench/tcp: ${err.message}`);
    process.exit(1);
  }
}
