#!/usr/bin/env bash
# Captures what Client.Associations's sacctmgr prints (its whole format, with id and qos), from
# a testbed that is up, once quotad has given proj-a its QOS list, for bridge/slurm's fixtures:
#
#   testbed/container.sh 24.11 bash -c 'make testbed-up && bash bridge/slurm/testdata/capture/assoc.sh 24.11 /out'
#
# writes OUTDIR/sacctmgr-assoc-REL.txt (default OUTDIR: this script's parent directory).
set -euo pipefail
REL=$1
OUT=${2:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck disable=SC1091
source "${TESTBED_DIR:-/tmp/slurmbridge-testbed}/env"
for _ in $(seq 60); do
	sacctmgr -n -P show assoc where account=proj-a user= format=qos | grep -q guar-proj-a && break
	sleep 1
done
# The format the fixtures are read with (bridge/slurm/associations.go, AssociationFields).
sacctmgr -n -P show assoc format=cluster,id,account,user,partition,parentname,qos,defaultqos,grptres,maxtres,grpjobs,grpsubmitjobs,maxjobs,maxsubmitjobs \
	>"$OUT/sacctmgr-assoc-$REL.txt"
echo "wrote $OUT/sacctmgr-assoc-$REL.txt" >&2
