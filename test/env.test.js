import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { discoverPlace, rankForMessages } from "../dist/env/discover.js";
import { REPO } from "./helpers/ranks.js";
import { expandHostlist, expandTasksPerNode } from "../dist/env/hostlist.js";
import { EnvError } from "../dist/env/place.js";

const torchrun = { RANK: "3", WORLD_SIZE: "8", LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "node01", MASTER_PORT: "29500" };
const openMpi = {
  OMPI_COMM_WORLD_RANK: "5",
  OMPI_COMM_WORLD_SIZE: "8",
  OMPI_COMM_WORLD_LOCAL_RANK: "1",
  OMPI_COMM_WORLD_LOCAL_SIZE: "4",
};
const slurm = {
  SLURM_PROCID: "6",
  SLURM_NTASKS: "7",
  SLURM_LOCALID: "0",
  SLURM_NODEID: "3",
  SLURM_TASKS_PER_NODE: "2(x3),1",
  SLURM_STEP_NODELIST: "gpu[07-10]",
  SLURM_JOB_NODELIST: "other[1-4]",
};

function envError(env) {
  try {
    discoverPlace(env);
  } catch (error) {
    assert.ok(error instanceof EnvError, `not an EnvError: ${error}`);
    assert.equal(error.exitCode, 2);
    assert.ok(!error.message.includes("\n"));
    return error.message;
  }
  assert.fail("expected an EnvError");
}

test("no launcher: a single rank", () => {
  assert.deepEqual(discoverPlace({}), { rank: 0, size: 1, localRank: 0, localSize: 1, nodeRank: 0, launcher: "none" });
  assert.equal(discoverPlace({ PATH: "/bin", SLURM_NTASKS: "4", SLURM_JOB_NODELIST: "n[1-2]" }).launcher, "none");
});

test("torchrun / runner launch", () => {
  assert.deepEqual(discoverPlace(torchrun), {
    rank: 3, size: 8, localRank: 1, localSize: 2, launcher: "torchrun", master: { addr: "node01", port: 29500 },
  });
  assert.equal(discoverPlace({ ...torchrun, GROUP_RANK: "2" }).nodeRank, 2);
  assert.equal(discoverPlace({ ...torchrun, NODE_RANK: "3" }).nodeRank, 3);
  // runner launch's ranks carry its pid too: messages name the command that started them. A token set by
  // hand (issue 43) is no launcher.
  assert.equal(discoverPlace({ ...torchrun, SPMD_RUNNER_TOKEN: "ab12", SPMD_LAUNCHER_PID: "42" }).launcher, "runner launch");
  assert.equal(discoverPlace({ ...torchrun, SPMD_RUNNER_TOKEN: "ab12" }).launcher, "torchrun");
});

test("torchrun without local variables is a single host", () => {
  const { LOCAL_RANK, LOCAL_WORLD_SIZE, ...env } = torchrun;
  assert.deepEqual(discoverPlace(env), {
    rank: 3, size: 8, localRank: 3, localSize: 8, launcher: "torchrun", master: { addr: "node01", port: 29500 },
  });
});

test("torchrun with one rank needs no master", () => {
  assert.deepEqual(discoverPlace({ RANK: "0", WORLD_SIZE: "1" }), {
    rank: 0, size: 1, localRank: 0, localSize: 1, launcher: "torchrun",
  });
});

test("Open MPI", () => {
  assert.deepEqual(discoverPlace(openMpi), { rank: 5, size: 8, localRank: 1, localSize: 4, launcher: "openmpi" });
  // The rank's index on its host (here as under --map-by node: rank 5 of 8 on 2 hosts is the third on its
  // host), not the host's number: Open MPI gives none.
  assert.equal(discoverPlace({ ...openMpi, OMPI_COMM_WORLD_NODE_RANK: "2" }).nodeRank, undefined);
  assert.deepEqual(discoverPlace({ ...openMpi, MASTER_ADDR: "10.0.0.1", MASTER_PORT: "1234" }).master, { addr: "10.0.0.1", port: 1234 });
  assert.deepEqual(discoverPlace({ ...openMpi, MASTER_ADDR: "10.0.0.1" }).master, { addr: "10.0.0.1" });
});

test("PMIx", () => {
  const env = { PMIX_RANK: "2", PMI_SIZE: "4", MPI_LOCALRANKID: "0", MPI_LOCALNRANKS: "2" };
  assert.deepEqual(discoverPlace(env), { rank: 2, size: 4, localRank: 0, localSize: 2, launcher: "pmix" });
});

test("MPICH Hydra", () => {
  const env = { PMI_RANK: "1", PMI_SIZE: "4", MPI_LOCALRANKID: "1", MPI_LOCALNRANKS: "4" };
  assert.deepEqual(discoverPlace(env), { rank: 1, size: 4, localRank: 1, localSize: 4, launcher: "mpich" });
});

test("Cray PALS", () => {
  const env = { PMI_RANK: "3", PMI_SIZE: "4", PALS_LOCAL_RANKID: "1", MPI_LOCALNRANKS: "2" };
  assert.deepEqual(discoverPlace(env), { rank: 3, size: 4, localRank: 1, localSize: 2, launcher: "mpich" });
});

test("MVAPICH", () => {
  const env = { MV2_COMM_WORLD_RANK: "0", MV2_COMM_WORLD_SIZE: "2", MV2_COMM_WORLD_LOCAL_RANK: "0", MV2_COMM_WORLD_LOCAL_SIZE: "1" };
  assert.deepEqual(discoverPlace(env), { rank: 0, size: 2, localRank: 0, localSize: 1, launcher: "mvapich" });
});

test("SLURM with SLURM_TASKS_PER_NODE", () => {
  assert.deepEqual(discoverPlace(slurm), {
    rank: 6, size: 7, localRank: 0, localSize: 1, nodeRank: 3, launcher: "slurm", master: { addr: "gpu07" },
  });
  assert.equal(discoverPlace({ ...slurm, SLURM_NODEID: "1", SLURM_PROCID: "3", SLURM_LOCALID: "1" }).localSize, 2);
});

test("SLURM with SLURM_NTASKS_PER_NODE and a master port", () => {
  const env = { SLURM_PROCID: "5", SLURM_NTASKS: "8", SLURM_LOCALID: "1", SLURM_NTASKS_PER_NODE: "4", SLURM_NODELIST: "a[3-4]", MASTER_PORT: "6000" };
  assert.deepEqual(discoverPlace(env), {
    rank: 5, size: 8, localRank: 1, localSize: 4, launcher: "slurm", master: { addr: "a3", port: 6000 },
  });
});

test("SLURM master port: MASTER_PORT, else derived alike on every task from the job and step ids", () => {
  assert.equal(discoverPlace({ ...slurm, SLURM_JOB_ID: "1234", SLURM_STEP_ID: "2" }).master.port, 16384 + ((1234 * 32 + 2) % 16384));
  assert.equal(discoverPlace({ ...slurm, SLURM_JOBID: "1234" }).master.port, 16384 + ((1234 * 32) % 16384));
  assert.equal(discoverPlace({ ...slurm, SLURM_JOB_ID: "1234", SLURM_STEP_ID: "2", MASTER_PORT: "6000" }).master.port, 6000);
  const ports = new Set(Array.from({ length: 32 }, (_, step) => discoverPlace({ ...slurm, SLURM_JOB_ID: "98765", SLURM_STEP_ID: String(step) }).master.port));
  assert.equal(ports.size, 32, "the first 32 steps of a job get distinct ports");
  for (const p of ports) assert.ok(p >= 16384 && p < 32768, `port ${p} outside 16384..32767`);
  assert.throws(() => discoverPlace({ ...slurm, SLURM_JOB_ID: "12a" }), { message: "environment: SLURM_JOB_ID=12a is not a non-negative integer" });
});

test("SLURM master: node lists in order, then the launch node, and MASTER_ADDR over all", () => {
  const { SLURM_STEP_NODELIST, ...noStep } = slurm;
  assert.equal(discoverPlace(noStep).master.addr, "other1");
  const { SLURM_JOB_NODELIST, ...noLists } = noStep;
  assert.equal(discoverPlace({ ...noLists, SLURM_LAUNCH_NODE_IPADDR: "10.1.1.1" }).master.addr, "10.1.1.1");
  assert.equal(discoverPlace(noLists).master, undefined);
  assert.equal(discoverPlace({ ...slurm, MASTER_ADDR: "head" }).master.addr, "head");
});

test("precedence: torchrun over everything, Open MPI over SLURM", () => {
  const mpiVars = { PMI_RANK: "0", PMI_SIZE: "8", MPI_LOCALRANKID: "0", MPI_LOCALNRANKS: "8" };
  assert.equal(discoverPlace({ ...slurm, ...openMpi, ...mpiVars, ...torchrun }).launcher, "torchrun");
  assert.equal(discoverPlace({ ...slurm, ...openMpi }).launcher, "openmpi");
  assert.equal(discoverPlace({ ...slurm, ...mpiVars }).launcher, "mpich");
});

test("an incomplete set yields to a later complete one (srun --mpi=pmix sets only PMIX_RANK)", () => {
  assert.equal(discoverPlace({ ...slurm, PMIX_RANK: "6" }).launcher, "slurm");
});

test("empty variables count as unset", () => {
  assert.equal(discoverPlace({ RANK: "", WORLD_SIZE: "" }).launcher, "none");
});

const partial = [
  [{ RANK: "3", MASTER_ADDR: "h", MASTER_PORT: "1" },
    "environment: RANK=3, MASTER_ADDR=h, MASTER_PORT=1 are set but WORLD_SIZE is missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
  [{ RANK: "3" },
    "environment: RANK=3 is set but WORLD_SIZE, MASTER_ADDR, MASTER_PORT are missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
  [{ WORLD_SIZE: "4", MASTER_ADDR: "h", MASTER_PORT: "1" },
    "environment: WORLD_SIZE=4, MASTER_ADDR=h, MASTER_PORT=1 are set but RANK is missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
  [{ RANK: "1", WORLD_SIZE: "4" },
    "environment: RANK=1, WORLD_SIZE=4 are set but MASTER_ADDR, MASTER_PORT are missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
  [{ ...torchrun, LOCAL_WORLD_SIZE: undefined },
    "environment: RANK=3, WORLD_SIZE=8, LOCAL_RANK=1, MASTER_ADDR=node01, MASTER_PORT=29500 are set but LOCAL_WORLD_SIZE is missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
  [{ OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2" },
    "environment: OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=2 are set but OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE are missing (Open MPI launch needs OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE)"],
  [{ PMIX_RANK: "0" },
    "environment: PMIX_RANK=0 is set but PMI_SIZE, MPI_LOCALRANKID or PALS_LOCAL_RANKID, MPI_LOCALNRANKS are missing (PMIx/MPICH launch needs PMIX_RANK or PMI_RANK, PMI_SIZE, MPI_LOCALRANKID or PALS_LOCAL_RANKID, MPI_LOCALNRANKS)"],
  [{ MV2_COMM_WORLD_SIZE: "2", MV2_COMM_WORLD_LOCAL_RANK: "0", MV2_COMM_WORLD_LOCAL_SIZE: "1" },
    "environment: MV2_COMM_WORLD_SIZE=2, MV2_COMM_WORLD_LOCAL_RANK=0, MV2_COMM_WORLD_LOCAL_SIZE=1 are set but MV2_COMM_WORLD_RANK is missing (MVAPICH launch needs MV2_COMM_WORLD_RANK, MV2_COMM_WORLD_SIZE, MV2_COMM_WORLD_LOCAL_RANK, MV2_COMM_WORLD_LOCAL_SIZE)"],
  [{ SLURM_PROCID: "0", SLURM_NTASKS: "2", SLURM_LOCALID: "0" },
    "environment: SLURM_PROCID=0, SLURM_NTASKS=2, SLURM_LOCALID=0 are set but SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE is missing (SLURM launch needs SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE with SLURM_NODEID)"],
  [{ ...slurm, SLURM_NODEID: undefined },
    "environment: SLURM_PROCID=6, SLURM_NTASKS=7, SLURM_LOCALID=0, SLURM_TASKS_PER_NODE=2(x3),1 are set but SLURM_NODEID is missing (SLURM launch needs SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE with SLURM_NODEID)"],
  // When nothing is complete, the first incomplete launcher is reported.
  [{ RANK: "0", PMIX_RANK: "0" },
    "environment: RANK=0 is set but WORLD_SIZE, MASTER_ADDR, MASTER_PORT are missing (torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"],
];

test("incomplete sets name what is there and what is missing", () => {
  for (const [env, expected] of partial) assert.equal(envError(env), expected);
});

const contradictory = [
  [{ ...torchrun, RANK: "8" }, "environment: RANK=8 must be less than WORLD_SIZE=8"],
  [{ ...torchrun, RANK: "-1" }, "environment: RANK=-1 is not a non-negative integer"],
  [{ ...torchrun, WORLD_SIZE: "four" }, "environment: WORLD_SIZE=four is not a non-negative integer"],
  [{ ...torchrun, WORLD_SIZE: "2.5" }, "environment: WORLD_SIZE=2.5 is not a non-negative integer"],
  [{ ...torchrun, WORLD_SIZE: "0", RANK: "0" }, "environment: WORLD_SIZE=0 must be at least 1"],
  [{ ...torchrun, LOCAL_RANK: "2" }, "environment: LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2"],
  [{ ...torchrun, LOCAL_WORLD_SIZE: "16", LOCAL_RANK: "3" }, "environment: LOCAL_WORLD_SIZE=16 must not exceed WORLD_SIZE=8"],
  [{ ...torchrun, MASTER_PORT: "70000" }, "environment: MASTER_PORT=70000 is not a port number (1..65535)"],
  [{ ...torchrun, MASTER_PORT: "0" }, "environment: MASTER_PORT=0 is not a port number (1..65535)"],
  [{ ...torchrun, GROUP_RANK: "9" }, "environment: GROUP_RANK=9 must be less than WORLD_SIZE=8"],
  [{ ...torchrun, GROUP_RANK: "1", NODE_RANK: "2" }, "environment: GROUP_RANK=1 and NODE_RANK=2 disagree"],
  [{ ...openMpi, OMPI_COMM_WORLD_LOCAL_RANK: "4" }, "environment: OMPI_COMM_WORLD_LOCAL_RANK=4 must be less than OMPI_COMM_WORLD_LOCAL_SIZE=4"],
  [{ ...openMpi, MASTER_PORT: "x" }, "environment: MASTER_PORT=x is not a non-negative integer"],
  [{ PMIX_RANK: "1", PMI_RANK: "2", PMI_SIZE: "4", MPI_LOCALRANKID: "0", MPI_LOCALNRANKS: "1" }, "environment: PMIX_RANK=1 and PMI_RANK=2 disagree"],
  [{ ...slurm, SLURM_NODEID: "4" }, "environment: SLURM_NODEID=4 has no entry in SLURM_TASKS_PER_NODE=2(x3),1 (4 nodes)"],
  [{ ...slurm, SLURM_TASKS_PER_NODE: "2(x3" }, 'environment: SLURM_TASKS_PER_NODE: tasks-per-node list "2(x3" is malformed at "2(x3" (expected a form like "2(x3),1")'],
  [{ ...slurm, SLURM_LOCALID: "1" }, "environment: SLURM_LOCALID=1 must be less than SLURM_TASKS_PER_NODE=2(x3),1 (1 on SLURM_NODEID=3)"],
  [{ ...slurm, SLURM_STEP_NODELIST: "gpu[07-" }, 'environment: SLURM_STEP_NODELIST: hostlist "gpu[07-" has an unclosed "["'],
  // A complete but contradictory set is an error even when a later launcher is complete.
  [{ ...openMpi, RANK: "9", WORLD_SIZE: "8", MASTER_ADDR: "h", MASTER_PORT: "1" }, "environment: RANK=9 must be less than WORLD_SIZE=8"],
];

test("contradictory sets say what is wrong", () => {
  for (const [env, expected] of contradictory) assert.equal(envError(env), expected);
});

test("expandHostlist works like scontrol show hostnames", () => {
  assert.deepEqual(expandHostlist("node[01-03,07],gpu5,rack[1-2]-n[1-2]"), [
    "node01", "node02", "node03", "node07", "gpu5", "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2",
  ]);
  assert.deepEqual(expandHostlist("a"), ["a"]);
  assert.deepEqual(expandHostlist("n[8-10]"), ["n8", "n9", "n10"]);
  assert.deepEqual(expandHostlist("n[098-100]"), ["n098", "n099", "n100"]);
  assert.deepEqual(expandHostlist("n[1-2].ib"), ["n1.ib", "n2.ib"]);
  assert.deepEqual(expandHostlist("n[5]"), ["n5"]);
});

test("malformed hostlists are EnvErrors naming the string", () => {
  const cases = [
    ["a[1-", 'environment: hostlist "a[1-" has an unclosed "["'],
    ["a]", 'environment: hostlist "a]" has a "]" without "["'],
    ["a[[1]]", 'environment: hostlist "a[[1]]" has nested brackets'],
    ["a[]", 'environment: hostlist "a[]" has a bad range ""'],
    ["a[x]", 'environment: hostlist "a[x]" has a bad range "x"'],
    ["a[3-1]", 'environment: hostlist "a[3-1]" has a descending range "3-1"'],
    ["a,,b", 'environment: hostlist "a,,b" has an empty host name'],
    ["", 'environment: hostlist "" has an empty host name'],
    ["n[1-9999999]", 'environment: hostlist "n[1-9999999]" names more than 1000000 hosts'],
  ];
  for (const [input, message] of cases) assert.throws(() => expandHostlist(input), { name: "EnvError", message });
});

test("expandTasksPerNode", () => {
  assert.deepEqual(expandTasksPerNode("2(x3),1"), [2, 2, 2, 1]);
  assert.deepEqual(expandTasksPerNode("4"), [4]);
  assert.deepEqual(expandTasksPerNode("1,3(x2)"), [1, 3, 3]);
  assert.throws(() => expandTasksPerNode("2(x"), {
    name: "EnvError",
    message: 'environment: tasks-per-node list "2(x" is malformed at "2(x" (expected a form like "2(x3),1")',
  });
});

test("the rank in messages is the launcher's place, or none", () => {
  assert.equal(rankForMessages({}), undefined, "no launcher");
  assert.equal(rankForMessages({ OMPI_COMM_WORLD_RANK: "3", OMPI_COMM_WORLD_SIZE: "4", OMPI_COMM_WORLD_LOCAL_RANK: "3", OMPI_COMM_WORLD_LOCAL_SIZE: "4" }), 3);
  assert.equal(rankForMessages({ RANK: "1", WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" }), 1);
  assert.equal(rankForMessages({ RANK: "5", WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" }), undefined, "contradictory");
});

test("only env/ reads the launchers' variables", () => {
  const LAUNCHER_VARIABLE = /\b(process\.)?env(\[["']|\.)(RANK|WORLD_SIZE|LOCAL_RANK|OMPI_\w+|PMIX?_\w+|SLURM_\w+|MV2_\w+|MPI_LOCAL\w+)\b/;
  const sources = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []);
  const readers = sources(path.join(REPO, "src"))
    .filter((f) => !f.includes(`${path.sep}env${path.sep}`))
    .filter((f) => LAUNCHER_VARIABLE.test(readFileSync(f, "utf8")) || /\b(PMI_RANK|PMIX_RANK|OMPI_COMM_WORLD_RANK|SLURM_PROCID)\b/.test(readFileSync(f, "utf8")))
    .map((f) => path.relative(REPO, f));
  assert.deepEqual(readers, []);
});
