#!/usr/bin/env bash
# Prints db-setup.sql.in (beside this script) once per CLIENT host, with the password read from
# PASSWORD_FILE. Both testbeds pipe it into their MariaDB (testbed/testbed.sh: 127.0.0.1 and
# localhost; docker/slurm-testbed/entrypoint.sh: '%'), so the password never lands in a file.
#
#   db-setup.sh PASSWORD_FILE CLIENT...
set -euo pipefail

die() { printf 'db-setup.sh: %s\n' "$*" >&2; exit 1; }

[ $# -ge 2 ] || { echo "usage: $0 PASSWORD_FILE CLIENT..." >&2; exit 2; }
template=$(dirname "${BASH_SOURCE[0]}")/db-setup.sql.in
pw=$(cat "$1") || die "cannot read $1"
shift
# It goes inside SQL quotes: the testbeds make it of hex digits, and nothing else is accepted.
[[ $pw =~ ^[A-Za-z0-9]+$ ]] || die "the password in the file must be letters and digits only"
for client in "$@"; do
	[[ $client =~ ^[A-Za-z0-9.%-]+$ ]] || die "not a MariaDB client host: $client"
	sql=$(sed -e "s|@DB_CLIENT@|$client|g" -e "s|@DB_PASSWORD@|$pw|g" "$template")
	! grep -q '@[A-Z][A-Z0-9_]*@' <<<"$sql" || die "unfilled placeholder in $template"
	printf '%s\n' "$sql"
done
