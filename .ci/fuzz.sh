#!/usr/bin/env bash
# Runs every native fuzz target (func FuzzXxx) of the packages given, each for FUZZTIME, one
# after another (go test -fuzz takes one target at a time). A target that finds a failing input
# fails the run: go writes that input to the package's testdata/fuzz/FuzzXxx/, which is kept
# (committed) as a regression seed every plain `go test` replays.
#
# One failure is not a finding: with a duration -fuzztime, Go's fuzz coordinator (go1.26) can
# report "context deadline exceeded" when the time runs out while a worker is still busy, on a
# loaded machine (golang/go#75804, fixed in go1.27). Such a run wrote no input and printed no
# panic or test error; the target is run once more, and fails the run if that fails too.
#
# usage: fuzz.sh FUZZTIME PKG...          fuzz.sh --classify LOG   (prints finding|deadline|pass)
set -uo pipefail
GO=${GO:-go}

# classify LOG: what a failed or passed go test -fuzz run printed. "deadline" only when the
# sole reason given under --- FAIL is the coordinator's deadline and no input was written.
classify() {
	local log=$1
	if ! grep -q -- '^--- FAIL' "$log" && ! grep -q '^FAIL' "$log"; then
		echo pass
		return
	fi
	if grep -q -e 'Failing input written to' -e '^panic:' -e 'fuzz: minimizing' "$log"; then
		echo finding
		return
	fi
	# The lines between "--- FAIL: Fuzz..." and the closing FAIL: only the deadline may be there.
	local reasons
	reasons=$(awk '/^--- FAIL: /{on=1; next} /^(FAIL|exit status|ok )/{on=0} on && NF' "$log" | sed 's/^[[:space:]]*//' | sort -u)
	if [ "$reasons" = "context deadline exceeded" ]; then
		echo deadline
	else
		echo finding
	fi
}

if [ "${1:-}" = "--classify" ]; then
	classify "$2"
	exit 0
fi

fuzztime=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0 retried=0
for pkg in $($GO list "$@"); do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		for try in 1 2; do
			echo "== $pkg $target ($fuzztime)"
			rc=0
			$GO test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || rc=$?
			grep -v '^fuzz: elapsed: [0-9]*s, gathering' "$log"
			verdict=$(classify "$log")
			[ $rc -ne 0 ] || [ "$verdict" != pass ] || break
			if [ $rc -ne 0 ] && [ "$verdict" = deadline ] && [ $try -eq 1 ]; then
				echo "fuzz: $target stopped on Go's fuzz deadline (no input written, golang/go#75804); once more"
				retried=$((retried + 1))
				continue
			fi
			echo "fuzz: $target failed (go test exit $rc, $verdict)" >&2
			exit 1
		done
		n=$((n + 1))
	done
done
echo "fuzz: $n targets passed, $fuzztime each ($retried rerun after Go's fuzz deadline)"
