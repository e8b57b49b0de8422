#!/usr/bin/env bash
# Reproduce the performance figures of issue 5 in one run on this machine and
# print them as a markdown table (progress goes to stderr, the table to stdout).
#
#   bash benches/measure.sh [--big] [--rounds N] [CORPUS_DIR]
#
# CORPUS_DIR defaults to /tmp/socialctx-bench/pheme, generated if absent with
# `gen-corpus --threads 6425` (PHEME-sized: ~99k replies, ~280 MB).
# --big also measures peak RSS on a 10x corpus (gen-corpus --threads 64250,
# ~3 GB of files; needs 10 GB free). --rounds N: repetitions of each timed
# run (default 3; the table shows medians). SOCIALCTX_ORACLE overrides the
# path of the Python oracle (default tests/fixtures/oracle/rpdnn_oracle.py).
#
# Times are the programs' own: floor's total_ms (walk + open + read of every
# file) and precache's "seconds" (the whole build, publication included).
# The floor is also taken as the best over FLOOR_THREADS readers (default
# "2 16 64"): the device's speed, which a cold build should approach.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/tmp/socialctx-bench
EX=$ROOT/target/release/examples
GEN=$ROOT/target/release/gen-corpus
ORACLE=${SOCIALCTX_ORACLE:-$ROOT/tests/fixtures/oracle/rpdnn_oracle.py}
THREADS=2
FLOOR_THREADS=${FLOOR_THREADS:-"2 16 64"}
ROUNDS=3
BIG=0
CORPUS=

log() { printf '>> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
    case $1 in
        --big) BIG=1 ;;
        --rounds) ROUNDS=${2:?--rounds needs a number}; shift ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) CORPUS=$1 ;;
    esac
    shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed for peak RSS (apt-get install time)"
mkdir -p "$WORK"

# --- helpers -----------------------------------------------------------------

# json_num KEY LINE: the number after "KEY": in a one-line JSON object.
json_num() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) exit 1; if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a/b; else print "n/a"}'; }
fmt() { awk -v x="$1" -v d="${2:-1}" 'BEGIN {printf "%.*f", d, x}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# gen DIR N: generate a corpus of N threads into DIR (atomically) unless it exists.
gen() {
    local dir=$1 n=$2
    [[ -d $dir ]] && return 0
    log "generating $dir (gen-corpus --threads $n)"
    rm -rf "$dir.tmp"
    "$GEN" "$dir.tmp" --threads "$n" >&2 || die "gen-corpus failed"
    mv "$dir.tmp" "$dir"
}

# floor_ms [--cold]: floor's total_ms with $THREADS threads.
floor_ms() { floor_ms_with "$THREADS" "$@"; }

# floor_ms_with N [--cold]: floor's total_ms with N threads.
floor_ms_with() {
    local out t=$1
    shift
    out=$("$EX/floor" "$CORPUS" --threads "$t" "$@") || die "floor failed"
    json_num total_ms "$out"
}

# best_floor_ms [--cold]: the smallest floor over FLOOR_THREADS readers.
best_floor_ms() {
    local best= v t
    for t in $FLOOR_THREADS; do
        v=$(floor_ms_with "$t" "$@")
        best=$(awk -v a="$best" -v b="$v" 'BEGIN {print (a == "" || b + 0 < a + 0) ? b : a}')
    done
    echo "$best"
}

# precache_ms THREADS [CORPUS CACHE]: precache's own build time in ms; sets REACTIONS.
REACTIONS=0
precache_ms() {
    local out
    out=$("$EX/precache" "${2:-$CORPUS}" "${3:-$CACHE}" --threads "$1" --quiet ${IO_DEPTH:+--io-depth "$IO_DEPTH"}) || die "precache failed"
    REACTIONS=$(sed -n 's/^reactions *\([0-9]*\).*/\1/p' <<<"$out")
    sed -n 's/^seconds *\([0-9.]*\).*/\1/p' <<<"$out" | awk '{printf "%.1f", $1 * 1000}'
}

# rss_mib CORPUS CACHE: peak RSS of a precache run, in MiB.
rss_mib() {
    local f=$WORK/time.out
    /usr/bin/time -f %M -o "$f" "$EX/precache" "$1" "$2" --threads "$THREADS" --quiet >/dev/null \
        || die "precache failed under /usr/bin/time"
    awk '{printf "%.0f", $1 / 1024}' "$f"
}

# --- setup -------------------------------------------------------------------

started=$(date +%s)
log "building the examples and gen-corpus (cargo build --release)"
(cd "$ROOT" && cargo build --release --examples --quiet && cargo build --release -p gen-corpus --quiet) \
    || die "build failed"
for b in floor precache loadbench; do
    [[ -x $EX/$b ]] || die "$EX/$b is missing after the build"
done
[[ -x $GEN ]] || die "$GEN is missing after the build"

if [[ -z $CORPUS ]]; then
    CORPUS=$WORK/pheme
    gen "$CORPUS" 6425
fi
[[ -d $CORPUS ]] || die "corpus directory $CORPUS does not exist"
CORPUS=$(cd "$CORPUS" && pwd)
CACHE=$WORK/cache-$(basename "$CORPUS")

# --- warm: floor vs precache, alternately ---------------------------------------

log "warm-up (fills the page cache)"
corpus_line=$("$EX/floor" "$CORPUS" --threads "$THREADS")
precache_ms "$THREADS" >/dev/null # not in a subshell: sets REACTIONS
reactions=$REACTIONS
files=$(json_num files "$corpus_line")
mbytes=$(awk -v b="$(json_num bytes "$corpus_line")" 'BEGIN {printf "%.0f", b / 1e6}')

floor_w=() floor_wb=() pre_w=() pre_1=()
for ((i = 1; i <= ROUNDS; i++)); do
    log "warm round $i/$ROUNDS: floor, best floor, precache --threads $THREADS, precache --threads 1"
    floor_w+=("$(floor_ms)")
    floor_wb+=("$(best_floor_ms)")
    pre_w+=("$(precache_ms "$THREADS")")
    pre_1+=("$(precache_ms 1)")
done
m_floor_w=$(printf '%s\n' "${floor_w[@]}" | median)
m_floor_wb=$(printf '%s\n' "${floor_wb[@]}" | median)
m_pre_w=$(printf '%s\n' "${pre_w[@]}" | median)
m_pre_1=$(printf '%s\n' "${pre_1[@]}" | median)

# --- partitioned: plan + 2 partitions + merge (warm) --------------------------------

PARTS=$WORK/parts-$(basename "$CORPUS")
rm -rf "$PARTS"
mkdir -p "$PARTS"
seconds_of() { sed -n 's/^seconds *\([0-9.]*\).*/\1/p' | awk '{printf "%.1f", $1 * 1000}'; }
plan_ms=() parts_ms=() merge_ms=()
for ((i = 1; i <= ROUNDS; i++)); do
    log "partitioned round $i/$ROUNDS: plan, 2 partitions, merge"
    t0=$(now_ms)
    "$EX/precache" "$CORPUS" --quiet --plan "$PARTS/plan.json" >/dev/null || die "plan failed"
    plan_ms+=($(($(now_ms) - t0)))
    t0=$(now_ms)
    for p in 0 1; do
        "$EX/precache" "$CORPUS" "$PARTS/p$p" --quiet --threads "$THREADS" \
            --plan "$PARTS/plan.json" --partition "$p/2" >/dev/null || die "partition $p failed"
    done
    parts_ms+=($(($(now_ms) - t0)))
    merge_ms+=("$("$EX/merge" "$PARTS/merged" "$PARTS/p0" "$PARTS/p1" | seconds_of)")
done
# Same cache files (the single build's directory may also hold derived/ files).
for f in "$PARTS/merged"/*; do
    cmp -s "$f" "$CACHE/$(basename "$f")" || die "the merged cache differs from the single build: $(basename "$f")"
done
[[ $(ls "$PARTS/merged" | wc -l) == $(ls "$CACHE" | grep -cE '^(manifest\.json|report\.jsonl|(shard|text)-[0-9]+\.rkyv)$') ]] \
    || die "the merged cache has other files than the single build"
m_plan=$(printf '%s\n' "${plan_ms[@]}" | median)
m_parts=$(printf '%s\n' "${parts_ms[@]}" | median)
m_merge=$(printf '%s\n' "${merge_ms[@]}" | median)

# --- incremental: no change, and 1% of threads touched ------------------------------

INC=$WORK/cache-incremental
"$EX/precache" "$CORPUS" "$INC" --quiet --incremental >/dev/null || die "incremental build failed"
touch_one_percent() {
    local d f
    for d in $(ls -d "$CORPUS"/*/*/* | awk 'NR % 100 == 0'); do
        f=$(ls "$d/reactions" 2>/dev/null | head -1 || true)
        [[ -n $f ]] && touch "$d/reactions/$f"
    done
    return 0
}
inc_w=() inc_c=() inc1_c=()
for ((i = 1; i <= ROUNDS; i++)); do
    log "incremental round $i/$ROUNDS: no change warm; no change cold; 1% touched cold"
    inc_w+=("$("$EX/precache" "$CORPUS" "$INC" --quiet --incremental | seconds_of)")
    "$EX/floor" "$CORPUS" --evict-only
    "$EX/floor" "$INC" --evict-only
    inc_c+=("$("$EX/precache" "$CORPUS" "$INC" --quiet --incremental | seconds_of)")
    touch_one_percent
    "$EX/floor" "$CORPUS" --evict-only
    "$EX/floor" "$INC" --evict-only
    inc1_c+=("$("$EX/precache" "$CORPUS" "$INC" --quiet --incremental | seconds_of)")
done
m_inc_w=$(printf '%s\n' "${inc_w[@]}" | median)
m_inc_c=$(printf '%s\n' "${inc_c[@]}" | median)
m_inc1_c=$(printf '%s\n' "${inc1_c[@]}" | median)

# --- cold: evict before each run -------------------------------------------------

floor_c=() floor_cb=() pre_c=() pre_c0=()
for ((i = 1; i <= ROUNDS; i++)); do
    log "cold round $i/$ROUNDS: floor --cold (and over $FLOOR_THREADS readers); evict, precache; evict, precache --io-depth 0"
    floor_c+=("$(floor_ms --cold)")
    floor_cb+=("$(best_floor_ms --cold)")
    "$EX/floor" "$CORPUS" --evict-only
    pre_c+=("$(precache_ms "$THREADS")")
    "$EX/floor" "$CORPUS" --evict-only
    pre_c0+=("$(IO_DEPTH=0 precache_ms "$THREADS")")
done
m_floor_c=$(printf '%s\n' "${floor_c[@]}" | median)
m_pre_c=$(printf '%s\n' "${pre_c[@]}" | median)
m_floor_cb=$(printf '%s\n' "${floor_cb[@]}" | median)
m_pre_c0=$(printf '%s\n' "${pre_c0[@]}" | median)

# --- peak RSS ----------------------------------------------------------------------

log "peak RSS of precache on $CORPUS"
rss=$(rss_mib "$CORPUS" "$CACHE")
rss_big="not measured (run with --big)"
if ((BIG)); then
    free_kb=$(df -Pk "$WORK" | awk 'NR == 2 {print $4}')
    if ((free_kb < 10 * 1024 * 1024)); then
        rss_big="skipped: only $((free_kb / 1024 / 1024)) GB free in $WORK (10 GB needed)"
        log "$rss_big"
    else
        big=$WORK/pheme10x
        gen "$big" 64250
        log "peak RSS of precache on $big"
        rss_big="$(rss_mib "$big" "$WORK/cache-pheme10x") MiB"
    fi
fi

# --- loadbench -----------------------------------------------------------------------

# The cache was just built, and shard files are written with O_DIRECT (not
# through the page cache): the first run reads it from disk. It is reported
# on its own; the timed runs below find it cached.
log "loadbench, first run after the build (reads the cache from disk)"
out=$("$EX/loadbench" "$CACHE" --normalize) || die "loadbench failed"
fresh_first=$(json_num first_batch_us "$out")
fresh_epoch=$(json_num epoch_ms "$out")

open_us=() first_us=() epoch_ms=() fillfloor_ms=()
for ((i = 1; i <= ROUNDS; i++)); do
    log "loadbench run $i/$ROUNDS"
    out=$("$EX/loadbench" "$CACHE" --normalize) || die "loadbench failed"
    open_us+=("$(json_num open_us "$out")")
    first_us+=("$(json_num first_batch_us "$out")")
    epoch_ms+=("$(json_num epoch_ms "$out")")
    fillfloor_ms+=("$(json_num fill_floor_ms "$out")")
done
m_open=$(printf '%s\n' "${open_us[@]}" | median)
m_first=$(printf '%s\n' "${first_us[@]}" | median)
m_epoch=$(printf '%s\n' "${epoch_ms[@]}" | median)
m_fillfloor=$(printf '%s\n' "${fillfloor_ms[@]}" | median)

# --- Python oracle -------------------------------------------------------------------

oracle_ms=
if [[ -f $ORACLE ]]; then
    log "Python oracle, one run (this is the slow one)"
    t0=$(now_ms)
    python3 "$ORACLE" "$CORPUS" --quiet >/dev/null 2>"$WORK/oracle.stderr" \
        || die "the oracle failed; see $WORK/oracle.stderr"
    oracle_ms=$(($(now_ms) - t0))
else
    log "no oracle at $ORACLE; skipping the Python comparison"
fi

# --- table ---------------------------------------------------------------------------

ms() { echo "$(fmt "$1" 1) ms"; }
x() { echo "$(ratio "$1" "$2")x"; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN {printf "%.0f", n / (t / 1000)}'; }

echo
echo "Corpus \`$CORPUS\`: $files files, $mbytes MB, $reactions reactions;" \
    "$(nproc) cores, $THREADS threads, medians of $ROUNDS; $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ)."
echo
echo "| figure | value | target |"
echo "|---|---|---|"
echo "| floor, warm | $(ms "$m_floor_w") | |"
echo "| precache, warm | $(ms "$m_pre_w") | |"
echo "| **precache / floor, warm** | **$(x "$m_pre_w" "$m_floor_w")** | ≤ 1.3x |"
echo "| floor, warm, best of $FLOOR_THREADS readers | $(ms "$m_floor_wb") | |"
echo "| **precache / best floor, warm** | **$(x "$m_pre_w" "$m_floor_wb")** | ≤ 1.7x |"
echo "| floor, cold | $(ms "$m_floor_c") | |"
echo "| floor, cold, best of $FLOOR_THREADS readers | $(ms "$m_floor_cb") | |"
echo "| precache, cold | $(ms "$m_pre_c") | |"
echo "| precache, cold, --io-depth 0 (no prefetch) | $(ms "$m_pre_c0") | |"
echo "| **precache / floor, cold** | **$(x "$m_pre_c" "$m_floor_c")** | |"
echo "| **precache / best floor, cold** | **$(x "$m_pre_c" "$m_floor_cb")** | ≤ 1.3x |"
echo "| plan / 2 partitions one after the other / merge (byte-identical) | $(ms "$m_plan") / $(ms "$m_parts") / $(ms "$m_merge") | |"
echo "| **merge / single build, warm** | **$(x "$m_merge" "$m_pre_w")** | ≤ 0.10x |"
echo "| incremental, no change, warm / vs warm floor | $(ms "$m_inc_w") / **$(x "$m_inc_w" "$m_floor_w")** | ≤ 1.0x |"
echo "| incremental, no change, cold / vs best cold floor | $(ms "$m_inc_c") / **$(x "$m_inc_c" "$m_floor_cb")** | ≤ 0.25x |"
echo "| incremental, 1% of threads touched, cold / vs best cold floor | $(ms "$m_inc1_c") / **$(x "$m_inc1_c" "$m_floor_cb")** | ≤ 0.35x |"
echo "| precache, warm, 1 thread | $(ms "$m_pre_1") | |"
echo "| **throughput 2 threads / 1 thread** | **$(x "$m_pre_1" "$m_pre_w")** | ≥ 1.8x |"
echo "| reactions/s, warm, 1 / 2 threads | $(rate "$reactions" "$m_pre_1") / $(rate "$reactions" "$m_pre_w") | |"
echo "| peak RSS of precache, this corpus | $rss MiB | |"
echo "| peak RSS of precache, 10x corpus | $rss_big | ≤ 256 MiB |"
echo "| loadbench open (LazyCache::open) | $(fmt "$m_open" 1) µs | |"
echo "| loadbench open + first batch | $(fmt "$m_first" 1) µs | |"
echo "| loadbench first batch / epoch, first run after a build (from disk) | $(fmt "$fresh_first" 1) µs / $(fmt "$fresh_epoch" 2) ms | |"
echo "| loadbench epoch (128 x 200 x 28, normalised) | $(fmt "$m_epoch" 2) ms | |"
echo "| loadbench zero-fill floor | $(fmt "$m_fillfloor" 2) ms | |"
echo "| **epoch / fill floor** | **$(x "$m_epoch" "$m_fillfloor")** | |"
if [[ -n $oracle_ms ]]; then
    echo "| Python oracle, one run | $(ms "$oracle_ms") | |"
    echo "| **oracle / precache (warm)** | **$(x "$oracle_ms" "$m_pre_w")** | |"
    echo "| **oracle / loadbench epoch** | **$(x "$oracle_ms" "$m_epoch")** | |"
else
    echo "| Python oracle | not found at \`$ORACLE\` | |"
fi
echo
echo "measure.sh took $(($(date +%s) - started)) s."
