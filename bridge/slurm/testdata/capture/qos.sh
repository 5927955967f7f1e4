#!/usr/bin/env bash
# Captures what Client.QOS's sacctmgr prints, with one QOS that sets every field Client.QOS
# reads and one that sets none, from a testbed that is up (slurmdbd holds the QOS), for
# bridge/slurm's fixtures:
#
#   testbed/container.sh 24.11 bash -c 'make testbed-up && bash bridge/slurm/testdata/capture/qos.sh 24.11 /out'
#
# writes OUTDIR/sacctmgr-qos-REL.txt (default OUTDIR: this script's parent directory), then
# removes the two QOS it added.
set -euo pipefail
REL=$1
OUT=${2:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck disable=SC1091
source "${TESTBED_DIR:-/tmp/slurmbridge-testbed}/env"
remove() { sacctmgr -i delete qos where name=capture-all,capture-none >/dev/null 2>&1 || true; }
remove
trap remove EXIT
sacctmgr -i add qos capture-all,capture-none >/dev/null
sacctmgr -i modify qos where name=capture-all set grptres=cpu=16,mem=64G,gres/gpu:a100=4 \
	preempt=capture-none preemptmode=requeue gracetime=90 preemptexempttime=1-02:03:04 priority=42 >/dev/null
# The format the fixtures are read with (bridge/slurm/qos.go, qosFields).
sacctmgr -n -P show qos format=name,grptres,preempt,preemptmode,gracetime,preemptexempttime,priority \
	>"$OUT/sacctmgr-qos-$REL.txt"
echo "wrote $OUT/sacctmgr-qos-$REL.txt" >&2
