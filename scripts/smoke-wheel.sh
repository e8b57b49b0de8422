#!/usr/bin/env bash
# Installs a built package (a wheel, or the sdist: that one compiles, so it
# needs Rust) into a fresh venv and runs the smoke test with a PATH that holds
# only that venv's bin/ (no cargo, no rustc): import, `socialctx --help`,
# `socialctx build --sample` (the corpus the package ships), `socialctx info`. CI (.ci/run) and
# the release workflow run it on what they built:
#
#   bash scripts/smoke-wheel.sh dist/socialctx-*.whl
set -euo pipefail

pkg=${1:?usage: bash scripts/smoke-wheel.sh WHEEL_OR_SDIST}
pkg=$(cd "$(dirname "$pkg")" && pwd)/$(basename "$pkg")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$pkg"

# From here on, nothing but the venv: a wheel must not need a toolchain.
bin=$work/venv/bin
clean=(env -i "PATH=$bin" "HOME=$work" "LANG=C.UTF-8")
if "${clean[@]}" "$bin/python" -c 'import shutil, sys; sys.exit(shutil.which("cargo") is None)'; then
    echo "error: cargo is on the smoke test's PATH" >&2
    exit 1
fi
"${clean[@]}" "$bin/python" -c 'import socialctx; print("import   socialctx", socialctx.__version__)'
"${clean[@]}" socialctx --help >/dev/null
"${clean[@]}" "$bin/python" -m socialctx build --help >/dev/null
# The sample corpus ships with the package: no path into this clone.
"${clean[@]}" socialctx build --sample "$work/cache" --quiet
"${clean[@]}" socialctx info "$work/cache"
"${clean[@]}" "$bin/python" - "$work/cache" <<'PY'
import sys

import socialctx

cache = socialctx.open(sys.argv[1], validate="all")
assert len(cache) == 38, len(cache)
batch = next(iter(socialctx.Loader(cache).epoch(range(len(cache)), 8)))
assert batch.features.shape == (8, 200, socialctx.NUM_FEATURES), batch.features.shape
print("smoke    ok:", cache)
PY
