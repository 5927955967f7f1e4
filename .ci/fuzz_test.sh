#!/usr/bin/env bash
# fuzz.sh's classifier on captured go test -fuzz outputs: only a bare coordinator deadline
# earns a second run; a written input, a test error beside the deadline, or a build failure
# fail at once.
set -u
dir=$(dirname "$0")
bad=0
for want in deadline:deadline finding:finding testerror:finding pass:pass buildfail:finding; do
	name=${want%%:*} expect=${want#*:}
	got=$(bash "$dir/fuzz.sh" --classify "$dir/testdata/fuzz-logs/$name.log")
	if [ "$got" != "$expect" ]; then
		echo "fuzz_test: $name.log classified $got, want $expect" >&2
		bad=1
	fi
done
[ $bad -eq 0 ] && echo "fuzz_test: classifier passed (5 logs)"
exit $bad
