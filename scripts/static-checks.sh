#!/usr/bin/env bash
# npm test's static checks: the type check (tsc) and the lint (eslint, type-aware), side by side: each is
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
wait "$tc"
typecheck=$?
for name in typecheck lint; do
  if [ -s "$out/$name" ]; then echo "[$name]"; cat "$out/$name"; fi
done
[ "$typecheck" -eq 0 ] || echo "[typecheck] failed (exit $typecheck)"
[ "$lint" -eq 0 ] || echo "[lint] failed (exit $lint)"
[ "$typecheck" -eq 0 ] && [ "$lint" -eq 0 ]
