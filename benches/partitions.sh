#!/usr/bin/env bash
# Scale-out of a partitioned build (issue 47, item 1): for each corpus size,
# a single build against plan + the slowest of 3 partitions + merge, the
# figure three machines would see. Each partition runs alone (as on its own
# machine), so they are timed one after the other; all warm (page cache).
# Wall and CPU (user + sys) per step, medians of ROUNDS, ratios to the
# single build of the same round; the merged cache is checked byte for byte
# against the single build. Prints the load average (the machine is shared).
# Beside it, the design's floor in the same round: the plan and a third of
# the single build (the merge links the partitions' shards and writes
# little else): partitions and a merge with no cost of their own would
# reach it, no closer. And how many of the merged cache's shard files are
# links to the partitions' (the rest, around the partitions' edges, copied).
#
#   bash benches/partitions.sh [--rounds N] [--sizes "6425 64250"] [--keep] [--pin-files]
#
# --pin-files makes the plan with --pin-files (the strict kind: tweet
# folders listed, partitions pin their files before and after reading).
#
# Corpora are generated with the repository's gen-corpus under
# $PARTS_DIR (default /tmp/socialctx-partitions) and removed at the end
# unless --keep.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=3
SIZES="6425 64250"
KEEP=0
PIN=()
while (($#)); do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --pin-files) PIN=(--pin-files); shift ;;
    *) echo "usage: $0 [--rounds N] [--sizes \"N ...\"] [--keep] [--pin-files]" >&2; exit 2 ;;
    esac
done
DIR=${PARTS_DIR:-/tmp/socialctx-partitions}
EX=$ROOT/target/release/examples
GEN=$ROOT/target/release/gen-corpus
log() { echo "[partitions] $*" >&2; }
die() { log "error: $*"; exit 1; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

log "building the examples and gen-corpus"
(cd "$ROOT" && cargo build --release --examples --quiet && cargo build --release -p gen-corpus --quiet) \
    || die "cargo build failed"
mkdir -p "$DIR"
cleanup() { ((KEEP)) || rm -rf "$DIR"; }
trap cleanup EXIT

# timed NAME CMD...: runs CMD, appends "wall cpu" (seconds) to $DIR/NAME.
timed() {
    local name=$1; shift
    /usr/bin/time -o "$DIR/t" -f "%e %U %S" "$@" >/dev/null || die "$name failed: $*"
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$DIR/t" >>"$DIR/$name"
}
col() { awk -v c="$2" '{print $c}' "$DIR/$1" | median; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| threads | build wall / CPU | plan | slowest partition | merge | **scale-out / build, wall** | CPU | floor: plan + build/3 | shard files linked | merged = build |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for n in $SIZES; do
    corpus=$DIR/c$n
    if [[ ! -d $corpus ]]; then
        log "generating $n threads"
        "$GEN" "$corpus" --threads "$n" >/dev/null || die "gen-corpus failed"
    fi
    rm -f "$DIR"/{build,plan,part,merge,out,outcpu,floor,linked}
    "$EX/precache" "$corpus" "$DIR/single" --quiet >/dev/null # warm the page cache
    for ((r = 1; r <= ROUNDS; r++)); do
        log "$n threads, round $r/$ROUNDS"
        rm -rf "$DIR/single" "$DIR"/p? "$DIR/merged"
        timed build "$EX/precache" "$corpus" "$DIR/single" --quiet
        timed plan "$EX/precache" "$corpus" --quiet --plan "$DIR/plan.json" "${PIN[@]}"
        rm -f "$DIR/part.r"
        for p in 0 1 2; do
            /usr/bin/time -o "$DIR/t" -f "%e %U %S" "$EX/precache" "$corpus" "$DIR/p$p" --quiet \
                --plan "$DIR/plan.json" --partition "$p/3" >/dev/null || die "partition $p failed"
            awk '{printf "%s %.2f\n", $1, $2 + $3}' "$DIR/t" >>"$DIR/part.r"
        done
        # The slowest partition of the round, by wall (its CPU beside it).
        sort -g -r "$DIR/part.r" | head -1 >>"$DIR/part"
        timed merge "$EX/merge" "$DIR/merged" "$DIR/p0" "$DIR/p1" "$DIR/p2"
        for f in "$DIR/single"/*; do
            [[ -f $f ]] || continue
            cmp -s "$f" "$DIR/merged/$(basename "$f")" || die "merged cache differs: $(basename "$f")"
        done
        linked=$(find "$DIR/merged" -name '*.rkyv' -links +1 | wc -l)
        echo "$linked/$(find "$DIR/merged" -name '*.rkyv' | wc -l)" >"$DIR/linked"
        paste -d' ' <(tail -1 "$DIR/build") <(tail -1 "$DIR/plan") \
            | awk '{printf "%.3f\n", ($3 + $1 / 3) / $1}' >>"$DIR/floor"
        # This round's scale-out over its own single build.
        paste -d' ' <(tail -1 "$DIR/build") <(tail -1 "$DIR/plan") <(tail -1 "$DIR/part") <(tail -1 "$DIR/merge") \
            | awk '{printf "%.3f\n", ($3 + $5 + $7) / $1}' >>"$DIR/out"
        paste -d' ' <(tail -1 "$DIR/build") <(tail -1 "$DIR/plan") <(tail -1 "$DIR/part") <(tail -1 "$DIR/merge") \
            | awk '{printf "%.3f\n", ($4 + $6 + $8) / $2}' >>"$DIR/outcpu"
    done
    bw=$(col build 1) bc=$(col build 2)
    echo "| $n | $bw s / $bc s | $(ratio "$(col plan 1)" "$bw")x ($(ratio "$(col plan 2)" "$bc")x CPU)" \
        "| $(ratio "$(col part 1)" "$bw")x ($(ratio "$(col part 2)" "$bc")x CPU)" \
        "| $(ratio "$(col merge 1)" "$bw")x ($(ratio "$(col merge 2)" "$bc")x CPU)" \
        "| **$(median <"$DIR/out")x** | $(median <"$DIR/outcpu")x | $(median <"$DIR/floor")x | $(cat "$DIR/linked") | yes |"
    ((KEEP)) || rm -rf "$corpus"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); ratios: medians over $ROUNDS rounds, each round's against its own single build"
