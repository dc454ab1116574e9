#!/usr/bin/env node
// tcp against iperf3: how close the tcp backend's 16 MiB allreduce comes to the link it runs on, beside Open
// MPI's btl tcp in the same setting, through bench/ompi_coll.c and OSU 5.3's osu_allreduce (docs/PERFORMANCE.md,
// "tcp against iperf3"). Needs root: the hosts are network namespaces (test/helpers/netns.js).
//   loopback  2 ranks in one host, --backend tcp (every byte crosses the host's loopback)
//   veth      1 rank on each of 2 hosts joined by veth pairs and a bridge
//   tbf       the same with each host's egress shaped to 1 Gbit/s (tbf, burst 256 kB, latency 50 ms)
//   hybrid    2 ranks on each of 2 hosts over veth: shm inside a host, tcp across (Open MPI: vader + tcp)
// Every peer runs unbound and its ranks are placed alike: the hosts share the machine's cores, so mpirun's
// default binding (every host's first rank on core 0) would pin what no real pair of hosts pins; ours and
// iperf3 are not bound either. For each link, in alternating rounds: iperf3 --bidir's rate each way, our
// allreduce's busbw (bytes each link carries per direction / time), Open MPI's and OSU's, and the ratios;
// medians of the rounds. A 2-core machine is CPU-bound in all of them but tbf, so only ratios within a run
// mean much. A peer that cannot run here (no iperf3, no Open MPI, no OSU build) is said in one line and its
// columns are left out.
//   node bench/tcp.mjs [--links loopback,veth,tbf,hybrid] [--rounds 3] [--iterations 20] [--warmup 5]
//                      [--seconds 4] [--also DIR] [--osu SOURCE | --no-osu]
//   (--also: another checkout's runner, measured alongside; --osu: OSU's tarball or tree, bench/lib/osu.mjs)
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { scriptArgs } from "../scripts/args.mjs";
import { inHost, netnsUnavailable, openMpi, placeRanks, withHosts } from "../test/helpers/netns.js";
import { OSU_DEFAULT } from "./lib/options.mjs";
import { OSU_PROGRAMS, parseOsu, prepareOsu } from "./lib/osu.mjs";
import { buildTools, mpiMissing, OMPI_COLL, runProcess } from "./lib/peers.mjs";

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

/**
 * mpirun in the first host running `argv` on the link's placement: ranks fill a host before the next, as
 * ours are placed, unbound as ours are.
 */
async function mpirun(link, hosts, dir, argv) {
  const slots = hosts.map((_, i) => link.placement.filter((h) => h === i).length);
  const launcher = openMpi({ slots, mapBy: "slot", bindTo: "none" })(hosts, dir, link.placement.length);
  const args = launcher.map((a) => (a === "tcp,self" && link.btl ? link.btl : a));
  return check(await run(inHost(hosts[0], [...NICE, ...args, ...argv])), `mpirun ${path.basename(argv[0])}`);
}

/** Open MPI's MPI_Allreduce (bench/ompi_coll.c): the slowest rank's time per iteration, averaged, µs. */
async function ompi(link, hosts, dir, o) {
  const p = await mpirun(link, hosts, dir, [OMPI_COLL, String(o.warmup), String(o.iterations), `allreduce:${BYTES / 4}`]);
  const doc = JSON.parse(p.stdout.trim().split("\n").reverse().find((l) => l.startsWith("{")));
  return doc.results[0].time.avg_us;
}

/** OSU's osu_allreduce (in folder `bin`) at 16 MiB: its Max Latency, the slowest rank's mean, µs. */
async function osu(link, hosts, dir, o, bin) {
  const p = await mpirun(link, hosts, dir, [path.join(bin, OSU_PROGRAMS.allreduce), "-f", "-m", `${BYTES}:${BYTES}`, "-i", String(o.iterations), "-x", String(o.warmup)]);
  const row = parseOsu(p.stdout).get(BYTES);
  if (!row) throw new Error(`osu_allreduce printed no row for ${BYTES} bytes`);
  return row.max_us;
}

/**
 * The peers that can run here: { iperf, ompi, osu (the folder of OSU's programs) }, each false where it
 * cannot, which `log` says in one line.
 */
function peersHere(osuSource, log) {
  const peers = { iperf: true, ompi: true, osu: false };
  const without = (name, why) => log(`bench/tcp: ${name} unavailable, going on without its column: ${why}`);
  if (spawnSync("sh", ["-c", "command -v iperf3"]).status !== 0) (peers.iperf = false), without("iperf3", "iperf3 not found (install iperf3)");
  const noMpi = mpiMissing();
  if (noMpi) (peers.ompi = false), without("Open MPI", noMpi);
  else {
    try {
      buildTools();
    } catch (e) {
      (peers.ompi = false), without("Open MPI", e.message);
    }
  }
  if (!osuSource) return peers;
  if (!peers.ompi) without("OSU 5.3", "it runs under Open MPI's mpirun");
  else {
    try {
      peers.osu = prepareOsu(osuSource, log);
    } catch (e) {
      without("OSU 5.3", e.message);
    }
  }
  return peers;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

/**
 * Measures the links named; returns one row per link: { link, W, iperf ([there, back] bytes/s, iperf3's
 * two directions), iperfEven (each round's mean of the two), ours, also, ompi, osu (busbw, bytes/s) }, each
 * the median of the rounds, undefined for a peer that did not run.
 */
export async function measureTcp({ links = ["loopback", "veth", "tbf", "hybrid"], rounds = 3, iterations = 20, warmup = 5, seconds = 4, also, osuSource = OSU_DEFAULT, log = console.error } = {}) {
  for (const name of links) if (!LINKS[name]) throw new Error(`no link "${name}" (one of ${Object.keys(LINKS).join(", ")})`);
  const peers = peersHere(osuSource, log);
  const o = { iterations, warmup };
  const rows = [];
  for (const name of links) {
    const link = LINKS[name];
    const W = link.placement.length;
    const busbw = (us) => (2 * (W - 1) / W) * BYTES / (us / 1e6);
    const got = { there: [], back: [], even: [], ours: [], also: [], ompi: [], osu: [] };
    await withHosts(link.hosts, async (hosts) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "tcp-bench-"));
      try {
        for (let i = 0; i < rounds; ++i) {
          if (peers.iperf) {
            const [a, b] = await iperf(hosts, seconds);
            got.there.push(a), got.back.push(b), got.even.push((a + b) / 2);
          }
          // Alternating which runner goes first, so neither always meets a machine the other just warmed.
          const runners = also ? (i % 2 ? [["also", also], ["ours", REPO]] : [["ours", REPO], ["also", also]]) : [["ours", REPO]];
          for (const [key, repo] of runners) got[key].push(busbw(await ours(link, hosts, dir, repo, o)));
          if (peers.ompi) got.ompi.push(busbw(await ompi(link, hosts, dir, o)));
          if (peers.osu) got.osu.push(busbw(await osu(link, hosts, dir, o, peers.osu)));
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, { ipv6: false, shape: link.shape });
    const m = Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v.length ? median(v) : undefined]));
    rows.push({ link: name, W, iperf: m.there === undefined ? undefined : [m.there, m.back], iperfEven: m.even, ours: m.ours, also: m.also, ompi: m.ompi, osu: m.osu, rounds: got });
  }
  return rows;
}

/** The Markdown table of measureTcp's rows (GB/s = 1e9 bytes/s); a peer no row has gets no columns. */
export function tcpTable(rows, { alsoName = "also" } = {}) {
  const gb = (x) => (x / 1e9).toFixed(3);
  const has = (k) => rows.some((r) => r[k] !== undefined);
  const ratio = (a, b) => (b === undefined ? "–" : (a / b).toFixed(2));
  // iperf3 serves both directions from one thread, so a round can split them unevenly; each round's mean
  // of the two is what an even split would give each way.
  const eachWay = (x, r) => (r.iperf ? `${r.iperf.map((d) => ratio(x, d)).join(", ")} (${ratio(x, r.iperfEven)})` : "–");
  const cols = [
    ["link", (r) => r.link],
    ["ranks", (r) => (r.link === "hybrid" ? "2 hosts × 2" : r.link === "loopback" ? "2 on 1 host" : "2 hosts × 1")],
    ...(has("iperf") ? [["iperf3 --bidir each way (GB/s)", (r) => (r.iperf ? r.iperf.map(gb).join(", ") : "–")]] : []),
    ["ours busbw (GB/s)", (r) => gb(r.ours)],
    ...(has("also") ? [[`${alsoName} busbw (GB/s)`, (r) => gb(r.also)]] : []),
    ...(has("ompi") ? [["Open MPI busbw (GB/s)", (r) => gb(r.ompi)]] : []),
    ...(has("osu") ? [["OSU busbw (GB/s)", (r) => gb(r.osu)]] : []),
    ...(has("iperf") ? [["ours / iperf3 each way (mean)", (r) => eachWay(r.ours, r)]] : []),
    ...(has("ompi") ? [["ours / Open MPI", (r) => ratio(r.ours, r.ompi)]] : []),
    ...(has("osu") ? [["ours / OSU", (r) => ratio(r.ours, r.osu)]] : []),
    ...(has("also") && has("iperf") ? [[`${alsoName} / iperf3 each way (mean)`, (r) => eachWay(r.also, r)]] : []),
    ...(has("also") && has("ompi") ? [[`${alsoName} / Open MPI`, (r) => ratio(r.also, r.ompi)]] : []),
  ];
  const lines = [`| ${cols.map(([h]) => h).join(" | ")} |`, `|${cols.map((_, i) => (i < 2 ? "---" : "---:")).join("|")}|`];
  for (const r of rows) lines.push(`| ${cols.map(([, cell]) => cell(r)).join(" | ")} |`);
  return lines.join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = scriptArgs(import.meta.url, {
    links: { type: "string", default: "loopback,veth,tbf,hybrid" }, rounds: { type: "string", default: "3" },
    iterations: { type: "string", default: "20" }, warmup: { type: "string", default: "5" }, seconds: { type: "string", default: "4" },
    also: { type: "string" }, osu: { type: "string", default: OSU_DEFAULT }, "no-osu": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  const missing = netnsUnavailable();
  if (missing) {
    console.error(`bench/tcp: ${missing}`);
    process.exit(2);
  }
  try {
    const rows = await measureTcp({
      links: values.links.split(","), rounds: Number(values.rounds), iterations: Number(values.iterations), warmup: Number(values.warmup),
      seconds: Number(values.seconds), also: values.also && path.resolve(values.also), osuSource: values["no-osu"] ? null : values.osu,
    });
    console.log(`16 MiB float32 allreduce (sum), every peer unbound, median of ${values.rounds} alternating rounds; load at end ${os.loadavg().map((v) => v.toFixed(2)).join(" ")}\n`);
    console.log(tcpTable(rows, { alsoName: values.also && path.basename(path.resolve(values.also)) }));
    if (values.json) console.log(JSON.stringify(rows));
  } catch (err) {
    console.error(`bench/tcp: ${err.message}`);
    process.exit(1);
  }
}
