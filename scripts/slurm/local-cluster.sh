#!/usr/bin/env bash
# A one-node SLURM cluster on this host, for tests and trying the sbatch examples: munged, slurmctld and
# slurmd with every file (key, sockets, state, logs, config) under one directory, on free ports, so it
# disturbs no system-wide SLURM or munge and several can run at once. Needs root and Debian's slurm-wlm
# and munge packages.
#
#   scripts/slurm/local-cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf` once the node is idle
#   SLURM_CONF=DIR/slurm.conf sbatch --wait scripts/slurm/one-node.sbatch
#   scripts/slurm/local-cluster.sh stop DIR    # ends the daemons it started (by their pid files)
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$(realpath -m "$2")

stop() {
  # Only the daemons this script started, by the pids they recorded.
  for name in slurmd slurmctld munged; do
    if [[ -f $dir/$name.pid ]]; then
      pid=$(cat "$dir/$name.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$dir/$name.pid"
    fi
  done
}

# A port nothing listens on now (the kernel's pick for an ephemeral bind).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

start() {
  for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (install slurm-wlm and munge)" >&2; exit 3; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "$0: needs root (slurmd runs jobs as their users)" >&2; exit 3; }
  mkdir -p "$dir"/{ctld,spool,munge}
  chmod 700 "$dir/munge"
  local node ctld_port slurmd_port cpus first_job
  node=$(hostname -s)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  # More CPUs than the host has, so a test can run 4 ranks on 2 cores (config_overrides below trusts it).
  cpus=$(( $(nproc) > 8 ? $(nproc) : 8 ))
  # Job ids from a random start: the runner derives its rendezvous port from the job id, and two clusters
  # on one host (concurrent test runs) would otherwise both start at job 1 and pick the same ports.
  first_job=$(( RANDOM * 30 + 1000 ))

  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"

  cat > "$dir/slurm.conf" <<CONF
ClusterName=spmd-local
FirstJobId=$first_job
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF

  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 150); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "$0: the node did not come up within 30 s; logs in $dir:" >&2
  tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log >&2 || true
  stop
  exit 1
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
