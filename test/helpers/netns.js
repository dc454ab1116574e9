// "Hosts" for multi-host tests: network namespaces, each with an eth0 joined by a veth pair to a bridge
// that lives in a namespace of its own. Nothing is added to the machine's own network: every address
// (10.77.0.0/24, fd77::/64) and device exists only inside namespaces made here, which are removed when the
// body ends, fails or the process exits. Ranks run in a host through `ip netns exec`, or are started by a
// real launcher (mpirun, mpiexec) through an ssh stand-in that does the same (launcherAgent).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { envForMpi, REPO, RUNNER, shmLeftovers } from "./ranks.js";

const PREFIX = "spmdt";
let made = 0;
const live = new Set();

function ip(args) {
  const p = spawnSync("ip", args, { encoding: "utf8" });
  if (p.status !== 0) throw new Error(`ip ${args.join(" ")}: ${(p.stderr || p.error?.message || "").trim()}`);
  return p.stdout;
}

function removeNamespace(ns) {
  spawnSync("ip", ["netns", "del", ns], { stdio: "ignore" });
  live.delete(ns);
}

process.once("exit", () => [...live].forEach(removeNamespace));

/** Why the tests that need namespaces cannot run here, or undefined. */
export function netnsUnavailable() {
  if (process.getuid?.() !== 0) return "needs root (ip netns, veth pairs, tc)";
  if (spawnSync("ip", ["-V"]).error) return "ip (iproute2) not found";
  if (spawnSync("tc", ["-V"]).error) return "tc (iproute2) not found";
  return undefined;
}

/** Namespaces that an earlier run of these tests left behind when it was killed. */
function removeStale() {
  for (const line of ip(["netns", "list"]).split("\n")) {
    const m = new RegExp(`^(${PREFIX}-(\\d+)-\\S+)`).exec(line);
    if (!m) continue;
    let alive = true;
    try {
      process.kill(Number(m[2]), 0);
    } catch {
      alive = false;
    }
    if (!alive) removeNamespace(m[1]);
  }
}

/**
 * Egress shaping on eth0 of every host: a token bucket at `rate` (bucket `burst`), behind a netem delay where
 * the kernel has sch_netem. Returns what was applied.
 */
function shapeLink(ns, { rate, delay, burst = "256kb" }) {
  const tc = (...args) => spawnSync("ip", ["netns", "exec", ns, "tc", ...args], { encoding: "utf8" });
  const tbf = ["tbf", "rate", rate, "burst", burst, "latency", "50ms"];
  if (delay && tc("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem", "delay", delay).status === 0) {
    const p = tc("qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", ...tbf);
    if (p.status !== 0) throw new Error(`tc tbf under netem: ${p.stderr}`);
    return `tbf ${rate} + netem delay ${delay}`;
  }
  const p = tc("qdisc", "add", "dev", "eth0", "root", ...tbf);
  if (p.status !== 0) throw new Error(`tc tbf: ${p.stderr}`);
  return `tbf ${rate}${delay ? ` (no delay: this kernel has no sch_netem)` : ""}`;
}

/**
 * Shapes only the traffic between hosts `a` and `b` to `rate`, both ways: on each one's eth0 an htb root
 * whose one class (rate) gets, by a u32 filter, the packets to the other's addresses; unclassified packets
 * go htb's direct way, unshaped. Returns what was applied.
 */
export function shapePair(a, b, rate) {
  for (const [from, to] of [[a, b], [b, a]]) {
    const tc = (...args) => {
      const p = spawnSync("ip", ["netns", "exec", from.ns, "tc", ...args], { encoding: "utf8" });
      if (p.status !== 0) throw new Error(`tc ${args.join(" ")}: ${p.stderr}`);
    };
    tc("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb");
    tc("class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", rate);
    if (to.ipv4) tc("filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", `${to.ipv4}/32`, "flowid", "1:1");
    if (to.ipv6) tc("filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ipv6", "prio", "2", "u32", "match", "ip6", "dst", `${to.ipv6}/128`, "flowid", "1:1");
  }
  return `htb ${rate} between ${a.name} and ${b.name}`;
}

/**
 * Makes `count` hosts, runs `body(hosts)` and removes them. A host is { ns, name, ipv4, ipv6 } (an address
 * is undefined when that family is off; `name`, "hostA", "hostB"..., is its hostname under a launcher).
 * `shape: { rate: "1gbit", delay: "1ms" }` shapes every host's egress; hosts.shaping then says what was
 * applied. `shape: [{ rate: "1gbit" }, ...]` shapes host i by entry i, and hosts.shaping is then per host.
 */
export async function withHosts(count, body, { ipv4 = true, ipv6 = true, shape } = {}) {
  removeStale();
  const tag = `${PREFIX}-${process.pid}-${made++}`;
  const sw = `${tag}-sw`;
  const hosts = Array.from({ length: count }, (_, i) => ({
    ns: `${tag}-h${i}`,
    name: `host${String.fromCharCode(65 + i)}`,
    ipv4: ipv4 ? `10.77.0.${i + 1}` : undefined,
    ipv6: ipv6 ? `fd77::${i + 1}` : undefined,
  }));
  try {
    for (const ns of [sw, ...hosts.map((h) => h.ns)]) {
      ip(["netns", "add", ns]);
      live.add(ns);
      ip(["-n", ns, "link", "set", "lo", "up"]);
    }
    ip(["-n", sw, "link", "add", "br0", "type", "bridge"]);
    ip(["-n", sw, "link", "set", "br0", "up"]);
    hosts.forEach((h, i) => {
      ip(["-n", sw, "link", "add", `p${i}`, "type", "veth", "peer", "name", "eth0", "netns", h.ns]);
      ip(["-n", sw, "link", "set", `p${i}`, "master", "br0", "up"]);
      if (h.ipv4) ip(["-n", h.ns, "addr", "add", `${h.ipv4}/24`, "dev", "eth0"]);
      // nodad: usable at once instead of after duplicate address detection.
      if (h.ipv6) ip(["-n", h.ns, "addr", "add", `${h.ipv6}/64`, "dev", "eth0", "nodad"]);
      ip(["-n", h.ns, "link", "set", "eth0", "up"]);
    });
    // An array shapes each host as its entry says (none where the entry is undefined).
    if (Array.isArray(shape)) hosts.shaping = hosts.map((h, i) => shape[i] && shapeLink(h.ns, shape[i]));
    else if (shape) hosts.shaping = hosts.map((h) => shapeLink(h.ns, shape))[0];
    return await body(hosts);
  } finally {
    [sw, ...hosts.map((h) => h.ns)].forEach(removeNamespace);
  }
}

/**
 * `node runner <args>` inside host `host` with exactly the environment `env` (see placeRanks): `done`
 * resolves with code, signal, stdout, stderr, pid; `child` is the process while it runs.
 */
export function runInHost(host, args, env, timeoutMs = 180_000) {
  const child = spawn("ip", ["netns", "exec", host.ns, process.execPath, RUNNER, ...args], { cwd: REPO, env });
  let stdout = "", stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const done = new Promise((resolve) =>
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, pid: child.pid });
    }),
  );
  return { child, done, output: () => stderr };
}

// Variables a test must not pass on to ranks: the launcher's, which discovery would read first.
const LAUNCHER_VARS = /^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|OMPI_|PMI|SLURM_)/;

/**
 * The torchrun-style environment of each rank when rank r runs on hosts[placement[r]]: local ranks count
 * within a host, and the master is rank 0's host (its IPv4 address, else IPv6).
 */
export function placeRanks(hosts, placement, extra = {}) {
  const master = hosts[placement[0]];
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !LAUNCHER_VARS.test(k)));
  return placement.map((h, rank) => {
    const local = placement.filter((x) => x === h).length;
    const localRank = placement.slice(0, rank).filter((x) => x === h).length;
    return {
      ...base,
      RANK: String(rank),
      WORLD_SIZE: String(placement.length),
      LOCAL_RANK: String(localRank),
      LOCAL_WORLD_SIZE: String(local),
      GROUP_RANK: String(h),
      MASTER_ADDR: master.ipv4 ?? master.ipv6,
      MASTER_PORT: "29500", // the namespaces are new: nothing else listens there
      ...(typeof extra === "function" ? extra(rank) : extra),
    };
  });
}

/** Runs one job's ranks spread over `hosts` (rank r on hosts[placement[r]]); resolves when all exited. */
export async function runSpread(hosts, placement, args, { env = {}, timeoutMs } = {}) {
  const envs = placeRanks(hosts, placement, env);
  const ranks = await Promise.all(placement.map((h, r) => runInHost(hosts[h], args, envs[r], timeoutMs).done));
  assert.deepEqual(shmLeftovers(ranks.map((p) => p.pid)), [], "shared-memory segments left behind");
  return ranks;
}

/** The namespace and hostname a launcher's HOST means: its IPv4 address. */
function hostCases(hosts) {
  return hosts.map((h) => `  ${h.ipv4}) ns=${h.ns} name=${h.name} ;;`).join("\n");
}

/**
 * Writes `dir/agent`, an ssh stand-in for launchers (Open MPI's plm_rsh_agent, Hydra's -launcher-exec): it
 * takes `[ssh options] HOST COMMAND...` and runs COMMAND as a shell command line, as ssh's remote shell
 * would, in HOST's namespace with the host's own hostname (a UTS namespace), so the ranks there see a host
 * of their own. Returns its path.
 */
export function launcherAgent(hosts, dir) {
  const agent = path.join(dir, "agent");
  writeFileSync(agent, `#!/bin/bash
# Options that take a value, then those that do not (ssh -x, -T...).
while [[ $1 == -* ]]; do case $1 in -[opliFJ]) shift 2 ;; *) shift ;; esac; done
host=$1; shift
case $host in
${hostCases(hosts)}
  *) echo "agent: no host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts bash -c "hostname $name; $*"
`);
  chmodSync(agent, 0o755);
  return agent;
}

/** The command line that runs `argv` in `host`, under its hostname: where a launcher itself runs. */
export function inHost(host, argv) {
  return ["ip", "netns", "exec", host.ns, "unshare", "--uts", "bash", "-c", `hostname ${host.name}; exec "$@"`, "bash", ...argv];
}

/** Processes still running in any of the hosts (pids), as "ip netns pids" lists them. */
export function processesIn(hosts) {
  return hosts.flatMap((h) => ip(["netns", "pids", h.ns]).split("\n").filter(Boolean).map(Number));
}

/** Which of the hosts' namespaces still exist. */
export function namespacesLeft(hosts) {
  const names = new Set(ip(["netns", "list"]).split("\n").map((l) => l.split(" ")[0]));
  return hosts.map((h) => h.ns).filter((ns) => names.has(ns));
}

/** The subnet of the hosts' IPv4 addresses, which launchers are told to use. */
export const SUBNET = "10.77.0.0/24";

/**
 * Open MPI's mpirun, `slots` ranks per host in a hostfile, placed `--map-by mapBy`: a launcher for launchIn.
 * `bindTo: "none"` leaves the ranks unbound: these hosts share the machine's cores, and mpirun's default
 * binding would pin the first rank of every host to the same core, which no real pair of hosts does. For the
 * same reason a waiting rank yields (mpi_yield_when_idle, which the runner sets itself only for ranks it sees
 * on one host): spinning, it took the core from the rank it waited for, and a doctor survey under CI's other
 * lane read 8-byte latencies of 10 to 24 ms and a 100 Mbit/s link at a quarter of its rate.
 */
export const openMpi = ({ slots, mapBy, bindTo }) => (hosts, dir, W) => {
  const hostfile = path.join(dir, "hostfile");
  writeFileSync(hostfile, hosts.map((h, i) => `${h.ipv4} slots=${slots[i]}\n`).join(""));
  return [
    "mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", launcherAgent(hosts, dir), "--hostfile", hostfile, "--map-by", mapBy,
    ...(bindTo ? ["--bind-to", bindTo] : []),
    "--mca", "mpi_yield_when_idle", "1", "--mca", "btl", "tcp,self", "--mca", "oob_tcp_if_include", SUBNET, "--mca", "btl_tcp_if_include", SUBNET, "-np", String(W),
  ];
};

/**
 * Runs `launcher`'s command line (from `launcher(hosts, dir, W)`) in hosts[0], under its hostname, starting
 * W ranks of `node runner <args>` that reach the other hosts through the agent; resolves with the code, the
 * ranks' stdout, and stdout and stderr together (`out`).
 */
export function launchIn(hosts, dir, W, { launcher, env = {} }, args) {
  const [program, ...rest] = inHost(hosts[0], [...launcher(hosts, dir, W), process.execPath, RUNNER, ...args]);
  return new Promise((resolve) => {
    const child = spawn(program, rest, { cwd: REPO, env: { ...envForMpi(), ...env } });
    let out = "", stdout = "";
    child.stdout.on("data", (d) => ((out += d), (stdout += d)));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out, stdout });
    });
  });
}
