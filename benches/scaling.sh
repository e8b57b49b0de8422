#!/usr/bin/env bash
# The scaling bench (issue 47, item 6), one command:
#
#   bash benches/scaling.sh [--sizes "6400 64000 256000"] [--rounds 3] [--keep] [--work DIR]
#
# For each size N it generates a corpus of N threads (tools/gen-corpus, the
# Rust generator; ~15 GB at 256k, so check the disk), then measures, warm,
# each step's wall and CPU seconds and its peak anonymous and file-backed
# memory (benches/peakmem.py): a full build; the incremental floor (a walk
# and a stat of every file, plus reading the 1% of threads that changed:
# examples/floor.rs --stat --read); an incremental build after 1% of the
# threads were touched, walking; the same with the crawler's change list
# (--changed); plan + 2 partitions + merge; one epoch of batches
# (examples/loadbench). Every ratio is against a baseline of the same run;
# build, floor and the two incremental builds alternate for --rounds rounds
# and each figure is the median of its rounds (the machine is shared).
# Prints a Markdown table per size and the 10^7-thread extrapolation (a
# straight line through the two largest sizes). Corpora and caches are
# removed after each size unless --keep.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZES="6400 64000 256000"
KEEP=0
ROUNDS=3
WORK=/tmp/socialctx-scaling
while (($#)); do
    case $1 in
        --sizes) SIZES=${2:?}; shift ;;
        --keep) KEEP=1 ;;
        --rounds) ROUNDS=${2:?}; shift ;;
        --work) WORK=${2:?}; shift ;;
        -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
EX=$ROOT/target/release/examples
BIN=$ROOT/target/release
PM="python3 $ROOT/benches/peakmem.py"
log() { printf '>> %s\n' "$*" >&2; }

log "building (cargo build --release: socialctx, examples, gen-corpus)"
(cd "$ROOT" && cargo build --release --quiet -p socialctx-cli -p gen-corpus \
    && cargo build --release --quiet --examples -p socialctx)
mkdir -p "$WORK"
RESULTS=$WORK/results.jsonl
: >"$RESULTS"

# measure SIZE LABEL CMD...: one peakmem line into $RESULTS.
measure() {
    local n=$1 label=$2
    shift 2
    $PM --label "$label" -- "$@" 2>/dev/null | sed "s/^{/{\"size\": $n, /" >>"$RESULTS"
}

for n in $SIZES; do
    corpus=$WORK/corpus-$n
    log "size $n: generating $corpus (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    [[ -d $corpus ]] || "$BIN/gen-corpus" "$corpus" --threads "$n" >&2
    "$EX/floor" "$corpus" >/dev/null # warm the page cache
    full=$WORK/full-$n inc=$WORK/inc-$n
    rm -rf "$full" "$inc" "$WORK/part-$n-"* "$WORK/merged-$n"
    "$BIN/socialctx" build "$corpus" "$inc" --incremental --quiet >/dev/null
    # 1% of the threads: one reply each, touched (size kept, times moved).
    list=$WORK/changed-$n.txt
    find "$corpus" -mindepth 3 -maxdepth 3 -type d | sort | awk 'NR % 100 == 0' \
        | while read -r d; do
            f=$(ls "$d/reactions" 2>/dev/null | head -1 || true)
            [[ -n $f ]] && echo "${d#"$corpus"/}/reactions/$f"
        done >"$list"
    touch_list() { (cd "$corpus" && xargs touch <"$list"); }
    for ((r = 1; r <= ROUNDS; r++)); do
        log "size $n, round $r/$ROUNDS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        rm -rf "$full"
        measure "$n" build "$BIN/socialctx" build "$corpus" "$full" --quiet
        touch_list
        measure "$n" floor "$EX/floor" "$corpus" --stat --read "$list"
        measure "$n" incremental "$BIN/socialctx" build "$corpus" "$inc" --incremental --quiet
        touch_list
        measure "$n" changed "$BIN/socialctx" build "$corpus" "$inc" --incremental --quiet \
            --changed "$list"
    done
    measure "$n" plan "$BIN/socialctx" plan "$corpus" "$WORK/plan-$n.json"
    for i in 0 1; do
        measure "$n" "partition$i" "$BIN/socialctx" build-partition "$corpus" \
            "$WORK/part-$n-$i" --plan "$WORK/plan-$n.json" --partition "$i/2" --quiet
    done
    measure "$n" merge "$BIN/socialctx" merge "$WORK/merged-$n" "$WORK/part-$n-0" "$WORK/part-$n-1"
    measure "$n" epoch "$EX/loadbench" "$full"
    if ((KEEP == 0)); then
        rm -rf "$corpus" "$full" "$inc" "$WORK/part-$n-"* "$WORK/merged-$n" "$WORK/plan-$n.json"
    fi
done

python3 - "$RESULTS" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = {}
for r in rows:
    runs.setdefault(r["size"], {}).setdefault(r["label"], []).append(r)
def median(xs):
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2
# Each figure the median of its rounds, field by field.
by = {n: {label: {k: median([r[k] for r in rs]) for k in ("wall_s", "cpu_s", "anon_mib", "file_mib")}
          for label, rs in labels.items()} for n, labels in runs.items()}
print(f"load average at the end: {sys.argv[2]}\n")
print("| threads | step | wall s | CPU s | anon MiB | file MiB |")
print("|---|---|---|---|---|---|")
for n in sorted(by):
    for label, r in by[n].items():
        print(f"| {n:,} | {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['anon_mib']:.0f} | {r['file_mib']:.0f} |")
print()
print("| threads | incremental / floor | --changed / floor | incremental / build | anon: incremental / build | anon: --changed / build |")
print("|---|---|---|---|---|---|")
for n in sorted(by):
    s = by[n]
    f = lambda a, b, k="wall_s": s[a][k] / s[b][k] if s[b][k] else float("nan")
    print(f"| {n:,} | {f('incremental','floor'):.2f}x | {f('changed','floor'):.2f}x | {f('incremental','build'):.2f}x "
          f"| {f('incremental','build','anon_mib'):.2f}x | {f('changed','build','anon_mib'):.2f}x |")
sizes = sorted(by)
if len(sizes) >= 2:
    a, b = sizes[-2], sizes[-1]
    print(f"\n10^7 threads, a straight line through {a:,} and {b:,}:\n")
    print("| step | wall s | anon MiB |")
    print("|---|---|---|")
    for label in by[b]:
        if label not in by[a]:
            continue
        out = []
        for k in ("wall_s", "anon_mib"):
            ya, yb = by[a][label][k], by[b][label][k]
            out.append(yb + (yb - ya) / (b - a) * (10**7 - b))
        print(f"| {label} | {out[0]:,.0f} | {out[1]:,.0f} |")
EOF
