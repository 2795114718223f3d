#!/usr/bin/env bash
# npm test: the static checks (scripts/static-checks.sh: tsc and eslint) run beside Jest, not before it: Jest's
# first minute is start-up and tests that wait on sockets and child processes, where the checks' 40 s of CPU fit.
# Jest's output streams as it runs; the checks' is printed after it. Arguments go to Jest. The exit status is
# non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bash scripts/static-checks.sh >"$out" 2>&1 &
checks=$!
npx jest "$@"
jest=$?
wait "$checks"
static=$?
if [ -s "$out" ]; then echo "== static checks (tsc, eslint)"; cat "$out"; fi
[ "$static" -eq 0 ] || echo "npm test: the static checks failed (exit $static)"
[ "$jest" -eq 0 ] || echo "npm test: Jest failed (exit $jest)"
[ "$jest" -eq 0 ] && [ "$static" -eq 0 ]
