#!/usr/bin/env bash
# Builds the in-browser demo into wasm-demo/dist: the skewjoin-wasm-demo crate for
# wasm32-unknown-unknown, its JavaScript bindings (wasm-bindgen), size-optimised with wasm-opt -Oz
# (npm's binaryen: Debian's is too old for current wasm-bindgen output), and the static page with
# Chart.js copied in, so the site makes no request outside its own origin.
#
# Works on a fresh machine with rustup, cargo, node and npm: it adds the wasm target, installs
# wasm-bindgen-cli at exactly the wasm-bindgen crate's version (about 4 minutes, once) and the
# pinned npm packages. Honours CARGO_TARGET_DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
cd "$root"

# The CLI must match the crate that generated the bindings' glue, to the patch version.
version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ -z "$version" ]; then
    echo "build.sh: wasm-bindgen is not in Cargo.lock" >&2
    exit 1
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }')" != "$version" ]; then
    echo "== installing wasm-bindgen-cli $version (once; a few minutes)"
    cargo install wasm-bindgen-cli --version "$version"
fi
if ! (cd "$here" && npm ls --depth=0 >/dev/null 2>&1); then
    (cd "$here" && npm ci --no-audit --no-fund)
fi

echo "== cargo build (wasm32-unknown-unknown, profile wasm)"
cargo build --profile wasm --target wasm32-unknown-unknown -p skewjoin-wasm-demo
target="${CARGO_TARGET_DIR:-$root/target}"
wasm="$target/wasm32-unknown-unknown/wasm/skewjoin_wasm_demo.wasm"

dist="$here/dist"
rm -rf "$dist"
mkdir -p "$dist/pkg" "$dist/vendor"
echo "== wasm-bindgen $version"
wasm-bindgen --target web --no-typescript --out-dir "$dist/pkg" "$wasm"
echo "== wasm-opt -Oz"
# The features rustc enables by default for wasm32-unknown-unknown; wasm-opt must accept them.
"$here/node_modules/.bin/wasm-opt" -Oz \
    --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$dist/pkg/skewjoin_wasm_demo_bg.wasm" -o "$dist/pkg/skewjoin_wasm_demo_bg.wasm"
cp "$here"/www/* "$dist/"
cp "$here/node_modules/chart.js/dist/chart.umd.min.js" "$dist/vendor/"
cp "$here/node_modules/chart.js/LICENSE.md" "$dist/vendor/LICENSE.chart.js.md"
size="$(wc -c < "$dist/pkg/skewjoin_wasm_demo_bg.wasm")"
echo "built $dist ($size bytes of wasm); serve it with: python3 -m http.server -d wasm-demo/dist 8080"
