#!/usr/bin/env bash
# Captures what Client.Associations's sacctmgr prints (less its defaultqos column), with limits set, from a testbed that
# is up (slurmdbd holds associations; capture.sh's cluster has none), for bridge/slurm's
# fixtures:
#
#   testbed/container.sh 24.11 bash -c 'make testbed-up && bash bridge/slurm/testdata/capture/assoc-limits.sh 24.11 /out'
#
# writes OUTDIR/sacctmgr-assoc-limits-REL.txt (default OUTDIR: this script's parent directory),
# then clears the limits it set.
set -euo pipefail
REL=$1
OUT=${2:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck disable=SC1091
source "${TESTBED_DIR:-/tmp/slurmbridge-testbed}/env"
user_limits() { sacctmgr -i modify user where name=alice account=proj-a set "$@" >/dev/null; }
account_limits() { sacctmgr -i modify account where name=proj-b set "$@" >/dev/null; }
user_limits grptres=gres/gpu=2 grpjobs=6 grpsubmitjobs=8 maxjobs=5 maxsubmitjobs=7 maxtres=gres/gpu:a100=3
account_limits grptres=cpu=16,gres/gpu:a100=4 maxjobs=9
trap 'user_limits grptres=gres/gpu=-1 grpjobs=-1 grpsubmitjobs=-1 maxjobs=-1 maxsubmitjobs=-1 maxtres=gres/gpu:a100=-1
	account_limits grptres=cpu=-1,gres/gpu:a100=-1 maxjobs=-1' EXIT
# The format the fixtures are read with (bridge/slurm/associations_test.go, capturedAssociationFields).
sacctmgr -n -P show assoc where cluster="$(scontrol show config | sed -n 's/^ClusterName *= *//p')" \
	format=cluster,account,user,partition,parentname,grptres,maxtres,grpjobs,grpsubmitjobs,maxjobs,maxsubmitjobs \
	>"$OUT/sacctmgr-assoc-limits-$REL.txt"
echo "wrote $OUT/sacctmgr-assoc-limits-$REL.txt" >&2
