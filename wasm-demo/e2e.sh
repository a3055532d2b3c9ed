#!/usr/bin/env bash
# Builds the in-browser demo and the skewjoin binary, then runs the end-to-end test in headless
# Chromium (Debian's package, installed here if missing; playwright-core never downloads one).
# Screenshots and timings are left in wasm-demo/e2e/out (or $E2E_OUT). Honours CARGO_TARGET_DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
cd "$root"

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "e2e.sh: $chromium is missing; install Debian's chromium package (apt-get install chromium)" >&2
        exit 1
    fi
    echo "== installing chromium (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! command -v npm >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "e2e.sh: node and npm are missing; install them (apt-get install nodejs npm)" >&2
        exit 1
    fi
    echo "== installing node and npm (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi

bash "$here/build.sh"
# SKEWJOIN names an already built binary to compare with; otherwise it is built here.
if [ -z "${SKEWJOIN:-}" ]; then
    echo "== cargo build skewjoin (release)"
    cargo build --release -p skewjoin-runtime
    SKEWJOIN="${CARGO_TARGET_DIR:-$root/target}/release/skewjoin"
fi

echo "== end-to-end test in headless chromium"
SKEWJOIN="$SKEWJOIN" CHROMIUM="$chromium" node --test "$here/e2e/test.mjs"
