#!/usr/bin/env bash
# npm test's static checks: the type check (the server's tsconfig and the console's, its client types regenerated
# from this checkout's OpenAPI document first) and the lint (eslint, type-aware, with the layer rules) in one process
# that builds each TypeScript program once and lends it to the lint (scripts/static-checks.ts); then the circle check.
# Each part's output is printed whole; the exit status is non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
node --import tsx scripts/static-checks.ts
checks=$?
# The circle check (.dependency-cruiser.cjs): no runtime import circle in the source.
npx depcruise --config .dependency-cruiser.cjs --output-type err api app domain providers lib db activities workflows worker bin dev >/tmp/circles.$$ 2>&1
circles=$?
if [ "$circles" -ne 0 ]; then echo "[circles]"; cat /tmp/circles.$$; echo "[circles] failed (exit $circles)"; fi
rm -f /tmp/circles.$$
[ "$checks" -eq 0 ] && [ "$circles" -eq 0 ]
