#!/usr/bin/env bash
# npm test: the static checks (scripts/static-checks.sh: tsc, eslint with the layer rules, the circle check) run beside
# Jest, not before it, from two minutes in (below).
# Jest's output streams as it runs; the checks' is printed after it. Arguments go to Jest. The exit status is
# non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The whole suite starts the checks two minutes in: its first wave (fuzz, the local model, the voice and SIP calls,
# which speak and listen in real time) is its busiest, and a SIP call's answer must be spoken before the callee hangs
# up. A run of chosen files (arguments) starts them at once.
delay=120
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
