#!/usr/bin/env bash
# npm test: the static checks (scripts/static-checks.sh: tsc, eslint with the layer rules, the circle check) run beside
# Jest, not before it, from eight minutes in (below).
# Jest's output streams as it runs; the checks' is printed after it. Arguments go to Jest. The exit status is
# non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The whole suite starts the checks eight minutes in, once the suites that speak and listen in real time (voice, SIP
# and browser calls, whose answers must come before the caller gives up) are done: on two cores their 70 s of CPU
# made those miss their moment. A run of chosen files (arguments) starts them at once.
delay=480
[ "$#" -gt 0 ] && delay=0
(sleep "${STATIC_CHECKS_DELAY:-$delay}"; bash scripts/static-checks.sh) >"$out" 2>&1 &
checks=$!
npx jest "$@"
jest=$?
wait "$checks"
static=$?
if [ -s "$out" ]; then echo "== static checks (tsc, eslint)"; cat "$out"; fi
[ "$static" -eq 0 ] || echo "npm test: the static checks failed (exit $static)"
[ "$jest" -eq 0 ] || echo "npm test: Jest failed (exit $jest)"
[ "$jest" -eq 0 ] && [ "$static" -eq 0 ]
