#!/usr/bin/env bash
# lowprio.sh NICE CMD... runs CMD in a session of its own whose scheduling
# autogroup has the given nice value, and returns CMD's exit code.
#
# With autogroups on (Linux's default), CPU is shared between sessions
# first and nice applies only inside one. The testbed's daemons each run in
# a session of their own, so a build under plain `nice` in CI's session
# still takes an equal share against each of them, and the cluster the e2e
# suites wait on runs slower. Here the build's whole session yields to them.
set -euo pipefail
nice=$1; shift
exec setsid --wait bash -c 'echo "$0" > /proc/$$/autogroup 2>/dev/null || renice -n "$0" -p $$ >/dev/null; exec "$@"' "$nice" "$@"
