// SLURM on several nodes for real: one slurmd per network-namespace host (scripts/slurm/local-cluster.sh with
// nodes: `slurmd -N NAME` at the host's address, its own spool directory and host name), the controller on
// the first, and scripts/slurm/multi-node.sbatch submitted there over 2 nodes × 2 tasks. Checked through its
// output file: the backend (shm within each node, tcp between), the hosts and their ranks, every row with
// 0 wrong; then that no daemon, rank or namespace is left behind.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { namespacesLeft, netnsUnavailable, processesIn, withHosts } from "./helpers/netns.js";
import { REPO } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const CLUSTER = path.join(REPO, "scripts/slurm/local-cluster.sh");
const tools = ["sbatch", "slurmctld", "slurmd", "munged", "nsenter"].filter((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0);
const test = requiredTest("slurm-hosts.test.js", netnsUnavailable() ?? (tools.length ? `${tools.join(", ")} not found (install slurm-wlm and munge)` : undefined));

test("sbatch multi-node.sbatch on a 2-node cluster of namespace hosts: shm+tcp, each node's ranks on its host, 0 wrong", { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-slurm-hosts-"));
  let made;
  try {
    await withHosts(2, async (hosts) => {
      made = hosts;
      const cluster = path.join(dir, "cluster");
      const start = spawnSync("bash", [CLUSTER, "start", cluster, ...hosts.map((h) => `${h.name}:${h.ns}:${h.ipv4}`)], { encoding: "utf8", timeout: 60_000 });
      try {
        assert.equal(start.status, 0, `the cluster did not start:\n${start.stdout}\n${start.stderr}`);
        // The test's own launcher variables must not reach the job: discovery would read them before SLURM's.
        const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(RANK|WORLD_SIZE|LOCAL_|MASTER_|OMPI_|PMI|SLURM_)/.test(k)));
        const out = path.join(dir, "job.out");
        const sbatch = spawnSync("ip", ["netns", "exec", hosts[0].ns, "sbatch", "--nodes=2", "--ntasks-per-node=2", "--wait", `--output=${out}`,
          `--chdir=${REPO}`, "scripts/slurm/multi-node.sbatch", "jobs/quickstart.json", "--iterations", "3", "--out", path.join(dir, "runs")],
        { cwd: REPO, env: { ...env, SLURM_CONF: path.join(cluster, "slurm.conf") }, encoding: "utf8", timeout: 180_000 });
        const output = readFileSync(out, "utf8");
        assert.equal(sbatch.status, 0, `${sbatch.stderr}\n${output}`);
        assert.match(output, /^# spmd-runner \S+: job quickstart, 4 ranks, backend shm\+tcp$/m);
        assert.match(output, /^# 2 hosts: hostA \(ranks 0,1\), hostB \(ranks 2,3\); links: 2 shm, 4 tcp$/m);
        const rows = output.split("\n").filter((l) => /^ {2}\S/.test(l));
        assert.ok(rows.length >= 10, `rows ran:\n${output}`);
        for (const row of rows) assert.match(row, /\s(0|N\/A)\s+N\/A\s+\d+$/, `#wrong: ${row}`);
        assert.match(output, /^# Out of bounds values : 0 OK$/m);
      } finally {
        spawnSync("bash", [CLUSTER, "stop", cluster], { stdio: "inherit" });
      }
      assert.deepEqual(processesIn(hosts), [], "daemons or ranks left in the hosts");
    }, { ipv6: false });
    assert.deepEqual(namespacesLeft(made), [], "namespaces left behind");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
