#!/usr/bin/env bash
# A Slurm cluster on this machine, for kvprof's tests and for trying `kvprof sweep --executor
# slurm` by hand: munged, slurmctld and slurmd as root from Debian's packages, one node (or
# several, below) with four GPUs in gres.conf backed by placeholder devices (the jobs see
# CUDA_VISIBLE_DEVICES as on a real GPU node; nothing runs on a GPU).
#
#   scripts/slurm-cluster.sh start [DIR]   writes DIR/slurm.conf and starts the daemons
#   scripts/slurm-cluster.sh stop  [DIR]   stops them
#
# DIR defaults to /tmp/kvprof-slurm. Use the cluster with `export SLURM_CONF=DIR/slurm.conf`.
# KVPROF_SLURM_PORT (default 16817) is slurmctld's port, slurmd's the next one: clusters in two
# folders with two ports run side by side (the tests start one each).
# KVPROF_SLURM_NODES=N (default 1) makes N nodes, kvn1..kvnN, each a slurmd of its own on this
# machine (`slurmd -N`, its own port) with four GPUs: a job of `--nodes=2` runs its steps on two
# nodes as on a real cluster, whose nodes here share the host and its CPUs.
set -euo pipefail

action=${1:-start}
dir=${2:-/tmp/kvprof-slurm}

# Each daemon asked to end, and killed when it has not within 10 s: a cluster started again at
# once in the same folder finds its ports free.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
stop() {
  for pidfile in "$dir"/slurmd*.pid "$dir/slurmctld.pid"; do
    [ -e "$pidfile" ] || continue
    if [ -s "$pidfile" ]; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        alive "$pid" || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

if [ "$action" = stop ]; then
  stop
  exit 0
fi
if [ "$action" != start ]; then
  echo "usage: $0 start|stop [DIR]" >&2
  exit 2
fi
for tool in slurmctld slurmd munged sbatch squeue scontrol; do
  command -v "$tool" >/dev/null || {
    echo "slurm-cluster: $tool is missing; run scripts/setup.sh (Debian's slurmctld, slurmd, slurm-client, munge)" >&2
    exit 1
  }
done

if [ "${#dir}" -gt 60 ]; then
  # slurmd's sockets live under the folder, and a socket's path holds at most 108 bytes.
  echo "slurm-cluster: $dir is too long a path (over 60 characters); give a shorter one" >&2
  exit 2
fi
stop
n_nodes=${KVPROF_SLURM_NODES:-1}
case "$n_nodes" in
  [1-8]) ;;
  *) echo "slurm-cluster: KVPROF_SLURM_NODES=$n_nodes: give 1 to 8 nodes" >&2; exit 2 ;;
esac
host=$(hostname -s)
nodes=()
if [ "$n_nodes" -eq 1 ]; then
  nodes=("$host")
else
  for i in $(seq 1 "$n_nodes"); do nodes+=("kvn$i"); done
fi
mkdir -p "$dir/state" "$dir/log" "$dir/gpu"
# Slurm wants a character device per GPU: placeholders with /dev/null's numbers, four per node.
for node in "${nodes[@]}"; do
  mkdir -p "$dir/spool/$node" "$dir/gpu/$node"
  for gpu in gpu0 gpu1 gpu2 gpu3; do
    rm -f "$dir/gpu/$node/$gpu"
    mknod "$dir/gpu/$node/$gpu" c 1 3
  done
done
port=${KVPROF_SLURM_PORT:-16817}
# Several nodes keep their spool folders apart (their names are short: slurmd's sockets are there).
spool_node=""
[ "$n_nodes" -eq 1 ] || spool_node=/%n
# The node as slurmd sees its hardware (sockets, cores, threads), so that it is not drained for
# claiming more than it has.
hardware=$(slurmd -C 2>/dev/null | head -n 1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//')
[ -n "$hardware" ] || hardware="CPUs=$(nproc)"
memory_mb=$(awk -v n="$n_nodes" '/MemTotal/ {print int($2 / 1024 * 0.9 / n)}' /proc/meminfo)
# Ports of this cluster's own (not Slurm's defaults, so that a real cluster's daemons are left
# alone); the node and controller at 127.0.0.1, whether or not the host name resolves.
cat >"$dir/slurm.conf" <<CONF
ClusterName=kvprof-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool$spool_node
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
MinJobAge=3600
SchedulerParameters=sched_interval=1
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
: >"$dir/gres.conf"
for i in "${!nodes[@]}"; do
  node=${nodes[$i]}
  # One node: Slurm's SlurmdPort; several: a port each after it (they share 127.0.0.1).
  node_port=""
  [ "$n_nodes" -eq 1 ] || node_port="Port=$((port + 2 + i)) NodeHostname=$host"
  echo "NodeName=$node NodeAddr=127.0.0.1 $node_port $hardware RealMemory=$memory_mb Gres=gpu:4 State=UNKNOWN" >>"$dir/slurm.conf"
  echo "NodeName=$node Name=gpu File=$dir/gpu/$node/gpu[0-3]" >>"$dir/gres.conf"
done

# munged: started once per machine, with the key the munge package made. Two clusters started
# at once (two tests) take turns through a lock, so that the second finds the first's munged
# instead of failing to start its own (munged must not inherit the lock).
(
  flock -w 30 9 || { echo "slurm-cluster: another start held /tmp/kvprof-munged.lock for 30 s" >&2; exit 1; }
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if ! setsid runuser -u munge -- munged </dev/null >/dev/null 2>&1 9>&- && ! pgrep -x munged >/dev/null; then
      echo "slurm-cluster: munged did not start (try: runuser -u munge -- munged --foreground)" >&2
      exit 1
    fi
  fi
) 9>/tmp/kvprof-munged.lock
export SLURM_CONF="$dir/slurm.conf"
# In sessions of their own, holding none of this script's streams: whoever ran the script (a
# test) is not left waiting on its pipes, and stopping it does not stop them.
setsid slurmctld </dev/null >>"$dir/log/daemons.out" 2>&1
for node in "${nodes[@]}"; do
  if [ "$n_nodes" -eq 1 ]; then
    setsid slurmd </dev/null >>"$dir/log/daemons.out" 2>&1
  else
    setsid slurmd -N "$node" </dev/null >>"$dir/log/daemons.out" 2>&1
  fi
done
# At most 30 s in all: each sinfo is bounded too (a slurmctld that never came up makes it wait).
deadline=$((SECONDS + 30))
while [ "$SECONDS" -lt "$deadline" ]; do
  if [ "$(timeout 3 sinfo -h -N -o '%T' 2>/dev/null | grep -cx idle)" -eq "$n_nodes" ]; then
    echo "slurm-cluster: up (nodes ${nodes[*]}, 4 GPUs each in gres.conf); export SLURM_CONF=$dir/slurm.conf"
    exit 0
  fi
  sleep 0.5
done
echo "slurm-cluster: the nodes did not become idle in 30 s; see $dir/log/" >&2
tail -n 5 "$dir/log/daemons.out" >&2 2>/dev/null || true
stop  # nothing of it is left running
exit 1
