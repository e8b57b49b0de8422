#!/usr/bin/env bash
# Every test of the repository, Rust and Python, in one command:
#
#   bash scripts/test-all.sh
#
# 1. the Rust workspace (the crate, gen-corpus, the binding crate compiles);
# 2. the release binaries the Python tests compare against (precache, dump,
#    stats, gen-corpus);
# 3. the Python package, installed with `pip install ./python` into a venv
#    (target/py-venv, made on first use; set SOCIALCTX_PYTHON to use another
#    interpreter that can pip-install), then its pytest suite. torch tests run
#    only where torch is importable.
#
# Cargo's target directory is $CARGO_TARGET_DIR when set (target/ otherwise);
# the venv and the binaries the Python tests run are looked for there.
# SOCIALCTX_WHEEL=path/to/socialctx-*.whl installs that wheel instead of
# building ./python (CI builds the wheel once with scripts/build-wheel.sh and
# tests that one, without compiling the binding a second time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-target}

cargo test --workspace --release --locked
cargo build --release --locked --examples -p socialctx -p gen-corpus

py=${SOCIALCTX_PYTHON:-}
if [[ -z $py ]]; then
    venv=$target/py-venv
    [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
    py=$venv/bin/python
fi
pip=("$py" -m pip install --quiet --disable-pip-version-check)
if [[ -n ${SOCIALCTX_WHEEL:-} ]]; then
    "${pip[@]}" "$SOCIALCTX_WHEEL" pytest
    # The same version may be installed already: replace it with this build.
    "${pip[@]}" --force-reinstall --no-deps "$SOCIALCTX_WHEEL"
else
    "${pip[@]}" ./python pytest
fi
"$py" -m pytest python/tests -q
