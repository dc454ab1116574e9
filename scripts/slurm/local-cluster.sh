#!/usr/bin/env bash
# A one-node SLURM cluster on this host, for tests and trying the sbatch examples: munged, slurmctld and
# slurmd with every file (key, sockets, state, logs, config) under one directory, on free ports, so it
# disturbs no system-wide SLURM or munge and several can run at once. Needs root and Debian's slurm-wlm
# and munge packages.
#
#   scripts/slurm/local-cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf` once the node is idle
#   SLURM_CONF=DIR/slurm.conf sbatch --wait scripts/slurm/one-node.sbatch
#   scripts/slurm/local-cluster.sh stop DIR    # ends the daemons it started (by their pid files)
#
# With NAME:NETNS:ADDR arguments after DIR, a cluster of several nodes instead: one slurmd per network
# namespace (slurmd -N NAME, at ADDR, with its own spool directory and host name), the controller in the
# first one. Every daemon sees DIR/hosts as /etc/hosts, so the nodes' names resolve; clients (sbatch,
# sinfo) then run in the first namespace: `ip netns exec NETNS sbatch ...`.
. "$(dirname "$0")/../usage.sh" "$@"
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR [NAME:NETNS:ADDR ...]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1
dir=$(realpath -m "$2")
shift 2
nodes=("$@")

stop() {
  # Only the daemons this script started, by the pids they recorded.
  for pidfile in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    if [[ -f $pidfile ]]; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$pidfile"
    fi
  done
}

# A port nothing listens on now (the kernel's pick for an ephemeral bind).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Runs a command as on node NAME: in its network namespace, under its host name, with DIR/hosts as /etc/hosts
# in a mount namespace of its own. (nsenter, not ip netns exec: that mounts a /sys without the cgroup tree
# slurmd needs.)
on_node() {
  local ns=$1 name=$2
  shift 2
  nsenter --net="/run/netns/$ns" unshare --uts --mount bash -c 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' \
    bash "$dir/hosts" "$name" "$@"
}

# Without nodes: this host, as itself. With them: the controller on the first.
on_first() { if ((${#nodes[@]})); then IFS=: read -r n ns _ <<<"${nodes[0]}"; on_node "$ns" "$n" "$@"; else "$@"; fi; }

# slurm.conf's lines that differ between one node here and nodes in namespaces.
node_conf() {
  if ((${#nodes[@]} == 0)); then
    echo "SlurmctldHost=$node"
    echo "SlurmdSpoolDir=$dir/spool"
    echo "SlurmdPidFile=$dir/slurmd.pid"
    echo "SlurmdLogFile=$dir/slurmd.log"
    echo "NodeName=$node CPUs=$cpus State=UNKNOWN"
    echo "PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP"
    return
  fi
  local n ns addr names=()
  printf '127.0.0.1 localhost\n' >"$dir/hosts"
  for spec in "${nodes[@]}"; do
    IFS=: read -r n ns addr <<<"$spec"
    names+=("$n")
    printf '%s %s\n' "$addr" "$n" >>"$dir/hosts"
    echo "NodeName=$n NodeAddr=$addr CPUs=$cpus State=UNKNOWN"
    mkdir -p "$dir/spool/$n"
  done
  IFS=: read -r n _ addr <<<"${nodes[0]}"
  echo "SlurmctldHost=$n($addr)"
  # %h: the host name, which on_node sets to the node's name.
  echo "SlurmdSpoolDir=$dir/spool/%h"
  echo "SlurmdPidFile=$dir/slurmd-%h.pid"
  echo "SlurmdLogFile=$dir/slurmd-%h.log"
  echo "PartitionName=local Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP"
}

start_slurmd() {
  if ((${#nodes[@]} == 0)); then slurmd -f "$SLURM_CONF"; return; fi
  local n ns
  for spec in "${nodes[@]}"; do
    IFS=: read -r n ns _ <<<"$spec"
    on_node "$ns" "$n" slurmd -N "$n" -f "$SLURM_CONF"
  done
}

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
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
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
EnforcePartLimits=ALL
$(node_conf)
CONF

  export SLURM_CONF=$dir/slurm.conf
  on_first slurmctld -f "$SLURM_CONF"
  start_slurmd
  local want=$(( ${#nodes[@]} > 0 ? ${#nodes[@]} : 1 ))
  for _ in $(seq 150); do
    if [[ $(on_first sinfo -h -N -o %T 2>/dev/null | grep -cx idle) -eq $want ]]; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "$0: the node did not come up within 30 s; logs in $dir:" >&2
  tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd*.log >&2 || true
  stop
  exit 1
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
