#!/usr/bin/env bash
# Builds the Python package the way CI (.ci/run) and the release workflow
# (.github/workflows/wheels.yml) do, into OUT_DIR:
#
#   bash scripts/build-wheel.sh OUT_DIR
#
# - the sdist (socialctx-<version>.tar.gz: the binding crate, the socialctx
#   crate it depends on, and Cargo.lock; building it needs Rust);
# - the abi3 wheel (one wheel for every CPython >= 3.9), built from that
#   sdist, tagged cp39-abi3-manylinux_2_17_<arch>, checked with
#   `auditwheel show`.
#
# Why manylinux_2_17 (glibc >= 2.17: CentOS/RHEL 7 and everything newer) and
# not _2_28: the extension calls nothing newer than glibc 2.17 (renameat2,
# close_range and friends go through rustix's raw system calls or
# libc::syscall, not glibc wrappers), Rust's standard library itself supports
# glibc 2.17, and the older floor lets the wheel install on the old cluster
# nodes a nightly cache build or a Slurm array tends to run on. `--zig` links
# against zig's glibc 2.17 stubs, so the floor does not depend on the glibc of
# the machine that builds (a plain `maturin build` here gave manylinux_2_34);
# a symbol newer than 2.17 would fail the link instead of producing a wheel
# that fails to import.
#
# Tools (maturin, ziglang, auditwheel; pinned) come from PyPI into a venv of
# their own: $SOCIALCTX_WHEEL_TOOLS, default wheel-tools/ in the target
# directory (made on first use). Cargo builds into $CARGO_TARGET_DIR (default
# target/; the --zig build lands in its x86_64-unknown-linux-gnu/, beside
# the release/ that `cargo build --release` uses).
set -euo pipefail

out=${1:?usage: bash scripts/build-wheel.sh OUT_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
platform=manylinux_2_17

# Absolute: maturin runs in python/, where a relative path would mean another place.
target=${CARGO_TARGET_DIR:-$repo/target}
mkdir -p "$target"
export CARGO_TARGET_DIR=$(cd "$target" && pwd)
tools=${SOCIALCTX_WHEEL_TOOLS:-$CARGO_TARGET_DIR/wheel-tools}
if [[ ! -x $tools/bin/auditwheel ]]; then
    python3 -m venv "$tools"
    "$tools/bin/pip" install --quiet --disable-pip-version-check \
        "maturin==1.16.0" "ziglang==0.17.1" "auditwheel==6.8.2"
fi
# maturin finds zig through the ziglang module of the interpreter on PATH.
export PATH="$tools/bin:$PATH"

cd "$repo/python"
rm -f "$out"/socialctx-*.whl "$out"/socialctx-*.tar.gz
maturin sdist --out "$out"
# The wheel is built from the sdist, unpacked (as `python -m build` does): a
# file the sdist lacks fails here, so CI needs no second compile that installs
# the sdist to find out. Unpacked at one place in the target directory, so
# that cargo reuses the dependencies between runs; --touch dates the files
# now, so the workspace crates always compile afresh (an sdist's files may
# carry old or fixed dates that cargo would take for unchanged).
sdist=$(ls "$out"/socialctx-*.tar.gz)
unpacked=$CARGO_TARGET_DIR/sdist-build
rm -rf "$unpacked"
mkdir -p "$unpacked"
tar -xzf "$sdist" -C "$unpacked" --strip-components=1 --touch
cd "$unpacked"
# Not --locked: the sdist's workspace lacks the benches package, so cargo
# drops its entries from the sdist's Cargo.lock (the versions stay those of
# the lock, as when pip builds the sdist).
maturin build --release --zig --compatibility "$platform" --out "$out"
cd "$repo"
rm -rf "$unpacked"

wheel=$(ls "$out"/socialctx-*.whl)
shown=$(auditwheel show "$wheel")
echo "$shown"
# The tag auditwheel derives from the symbols the extension links must be the
# one the wheel claims: abi3, $platform.
case $wheel in
*-cp39-abi3-*"${platform}_$(uname -m)"*.whl) ;;
*) echo "error: $wheel is not tagged cp39-abi3-$platform" >&2; exit 1 ;;
esac
grep -q "\"${platform}_$(uname -m)\"" <<<"$shown" || {
    echo "error: auditwheel does not find $wheel consistent with ${platform}_$(uname -m)" >&2
    exit 1
}
ls -l "$out"
