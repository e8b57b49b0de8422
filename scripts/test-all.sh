#!/usr/bin/env bash
# Every test of the repository, Rust and Python, in one command:
#
#   bash scripts/test-all.sh
#
# 1. `cargo test --release`: the default workspace members (the crate,
#    pycompat, gen-corpus, the benches package). It also builds what the
#    Python tests run (the examples and the gen-corpus binary), with the
#    same features as the README's first command (`cargo run --release
#    --example precache`), so the crate is compiled once, and not at all
#    after that command (see the comment on default-members in Cargo.toml).
# 2. the Python package, installed with `pip install "./python[test]"` into a venv
#    (target/py-venv, made on first use; set SOCIALCTX_PYTHON to use another
#    interpreter that can pip-install). maturin compiles the binding (its
#    own feature set: the crate once more, in the same target directory).
# 3. its pytest suite, on one process per core (at most 4; pytest-xdist;
#    SOCIALCTX_PYTEST_WORKERS=1 runs it in one). The suites of the optional
#    parts (torch, PyG, Dask) skip where their package is missing; the end of
#    the output names every skipped test and the one command that installs
#    what they need.
#
# Cargo's target directory is $CARGO_TARGET_DIR when set (target/ otherwise);
# the venv and the binaries the Python tests run are looked for there.
# SOCIALCTX_TESTS=python runs steps 2 and 3 only, with the binaries an
# earlier full run built in the same target directory (CI's newcomer
# stage: the Rust tests ran on the same commit just before it, and they
# do not depend on which Python packages are installed).
# SOCIALCTX_WHEEL=path/to/socialctx-*.whl installs that wheel instead of
# building ./python (CI builds the wheel once with scripts/build-wheel.sh and
# tests that one, without compiling the binding a second time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-target}
start=$SECONDS

case ${SOCIALCTX_TESTS:-all} in
    all) cargo test --release --locked ;;
    python)
        # What `cargo test` builds and the Python tests run.
        for bin in gen-corpus examples/precache examples/dump examples/stats; do
            [[ -x $target/release/$bin ]] || {
                echo "test-all: SOCIALCTX_TESTS=python needs $target/release/$bin;" \
                    "run bash scripts/test-all.sh once without it" >&2
                exit 2
            }
        done
        ;;
    *) echo "test-all: SOCIALCTX_TESTS is all or python, not ${SOCIALCTX_TESTS}" >&2; exit 2 ;;
esac
rust_done=$SECONDS

py=${SOCIALCTX_PYTHON:-}
if [[ -z $py ]]; then
    venv=$target/py-venv
    [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
    py=$venv/bin/python
fi
pip=("$py" -m pip install --quiet --disable-pip-version-check)
if [[ -n ${SOCIALCTX_WHEEL:-} ]]; then
    # The test extra (pytest, hypothesis, xxhash): suites import them.
    "${pip[@]}" "$SOCIALCTX_WHEEL[test]"
    # The same version may be installed already: replace it with this build.
    "${pip[@]}" --force-reinstall --no-deps "$SOCIALCTX_WHEEL"
    extras="\"$py\" -m pip install '$SOCIALCTX_WHEEL[torch,pyg,dask,describe]'"
else
    "${pip[@]}" "./python[test]"
    extras="\"$py\" -m pip install './python[torch,pyg,dask,describe]'"
fi
installed=$SECONDS

# -rs: one line per skipped test, with its reason, for the summary below;
# --durations: the slowest tests, to keep CI within its time. -n: pytest-xdist
# (the test extra) runs the suite on one process per core, at most 4
# (SOCIALCTX_PYTEST_WORKERS overrides; 1 runs it in this process): on 2
# cores, 307 s instead of 438 (CI, 2026-12-07). The tests share no state but
# the target directory, whose binaries they only run.
workers=${SOCIALCTX_PYTEST_WORKERS:-$(($(nproc) < 4 ? $(nproc) : 4))}
parallel=()
if ((workers > 1)); then parallel=(-n "$workers"); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$py" -m pytest python/tests -q -rs --durations=25 "${parallel[@]}" 2>&1 | tee "$log" || status=$?

echo
echo "test-all: Rust $((rust_done - start)) s, Python package $((installed - rust_done)) s," \
    "pytest $((SECONDS - installed)) s"
skipped=$(grep -E '^SKIPPED \[' "$log" || true)
if [[ -n $skipped ]]; then
    echo "test-all: skipped (not run here; CI runs them):"
    sed -E 's/^SKIPPED \[([0-9]+)\] ([^:]+):[0-9]+: /  \2 (\1): /' <<<"$skipped"
    if grep -qE "could not import|not installed" <<<"$skipped"; then
        echo "test-all: to run the optional suites, install what they need, then run this again:"
        echo "  $extras"
    fi
    if grep -q SOCIALCTX_WHEEL <<<"$skipped"; then
        echo "  (the wheel test needs a built wheel: bash scripts/build-wheel.sh dist/," \
            "then SOCIALCTX_WHEEL=dist/socialctx-*.whl bash scripts/test-all.sh)"
    fi
else
    echo "test-all: nothing skipped"
fi
exit "$status"
