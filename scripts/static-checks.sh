#!/usr/bin/env bash
# npm test's static checks: the type check (tsc; then the console's, tsc -p console) and the lint (eslint, type-aware, with the layer rules), side by side: each is
# single-threaded and they share nothing, so on two cores the pair takes as long as the slower one. Each one's
# output is printed whole, in turn; the exit status is non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npx tsc --noEmit >"$out/typecheck" 2>&1 &
tc=$!
npx eslint . >"$out/lint" 2>&1
lint=$?
# The circle check (.dependency-cruiser.cjs): no runtime import circle in the source; after eslint, not beside it
# (two cores: tsc and eslint already fill them).
npx depcruise --config .dependency-cruiser.cjs --output-type err api app domain providers lib db activities workflows worker bin dev >"$out/circles" 2>&1
circles=$?
# The console against the API's contract: its client types regenerated from this checkout's OpenAPI document, then tsc
# over console/ (a route or field the console uses and the API no longer has fails here).
{ node --import tsx scripts/console-build.ts --types && npx tsc -p console --noEmit; } >"$out/console" 2>&1
console=$?
wait "$tc"
typecheck=$?
for name in typecheck lint circles console; do
  if [ -s "$out/$name" ]; then echo "[$name]"; cat "$out/$name"; fi
done
[ "$typecheck" -eq 0 ] || echo "[typecheck] failed (exit $typecheck)"
[ "$lint" -eq 0 ] || echo "[lint] failed (exit $lint)"
[ "$circles" -eq 0 ] || echo "[circles] failed (exit $circles)"
[ "$console" -eq 0 ] || echo "[console] failed (exit $console)"
[ "$typecheck" -eq 0 ] && [ "$lint" -eq 0 ] && [ "$circles" -eq 0 ] && [ "$console" -eq 0 ]
