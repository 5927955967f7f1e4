#!/usr/bin/env bash
# Adds the testbed's cluster, its projects' accounts and their users to slurmdbd, each unless it
# is there (sacctmgr exits non-zero on "Nothing new added"), and makes root a Slurm
# Administrator. Both testbeds run it with their facts (testbed-render shell: CLUSTER, PROJECTS):
# testbed/testbed.sh, and docker/slurm-testbed/entrypoint.sh, which adds quotad's own user as an
# Administrator too (quotad changes QOS and accounts, and pending jobs' QOS).
#
#   ensure-accounts.sh [--admin USER]... CLUSTER ACCOUNT:USER...
set -euo pipefail

admins=()
while [ "${1:-}" = --admin ]; do
	admins+=("$2")
	shift 2
done
[ $# -ge 2 ] || { echo "usage: $0 [--admin USER]... CLUSTER ACCOUNT:USER..." >&2; exit 2; }
cluster=$1
shift

sacctmgr -n -P show cluster format=cluster | grep -qx "$cluster" || sacctmgr -i add cluster "$cluster" >/dev/null
for entry in "$@"; do
	acct=${entry%%:*}
	user=${entry#*:}
	sacctmgr -n -P show account "$acct" format=account | grep -qx "$acct" ||
		sacctmgr -i add account "$acct" cluster="$cluster" description="project $acct" organization=slurmbridge >/dev/null
	sacctmgr -n -P show assoc where cluster="$cluster" account="$acct" user="$user" format=user | grep -qx "$user" ||
		sacctmgr -i add user "$user" account="$acct" defaultaccount="$acct" cluster="$cluster" >/dev/null
done
sacctmgr -n -P show user root format=adminlevel | grep -qx Administrator ||
	sacctmgr -i modify user root set adminlevel=Administrator >/dev/null
for user in "${admins[@]}"; do
	sacctmgr -n -P show user "$user" format=adminlevel | grep -qx Administrator ||
		sacctmgr -i add user "$user" account=root cluster="$cluster" adminlevel=Administrator >/dev/null
done
