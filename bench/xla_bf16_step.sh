#!/usr/bin/env bash
# GPT-mini's training step under --autocast bf16 on mstep's xla and cpu
# backends, f32 alongside, in one run: bench/xla_peers.sh's GPT workload
# (dim 256, 4 layers, 4 heads, seq 256, batch 8, vocab 1024, no clipping),
# replayed by examples/gpt_train, every process pinned to T cores with
# OMP_NUM_THREADS=T (xla_peers.sh's `pinned`). Each round runs every side
# once per thread count; a figure is the median of the rounds' step_ms
# (gpt_train's steady-state step time), ratio = cpu/xla (> 1: xla faster).
# The fallbacks column must be 0 (no callout, no host kernel) on both.
#
# Usage: bash bench/xla_bf16_step.sh [--build DIR] [--threads "1 2"] [--rounds N] [--steps N]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
B=build ROUNDS=3 STEPS=10
THREADS="1 $(nproc)"
[ "$(nproc)" = 1 ] && THREADS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) B=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    *) echo "xla_bf16_step.sh: unknown argument $1 (see the usage at the top)" >&2; exit 2 ;;
  esac
  shift
done
GPT=$B/examples/gpt_train
[ -x "$GPT" ] || { echo "xla_bf16_step.sh: $GPT is missing: build the gpt_train target" >&2; exit 2; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
for round in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    echo "# round $round/$ROUNDS, $t threads (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for dtype in bf16 f32; do
      for device in cpu xla; do
        flags=()
        [ "$dtype" = bf16 ] && flags=(--autocast bf16)
        out=$(OMP_NUM_THREADS=$t taskset -c "0-$((t - 1))" "$GPT" --device "$device" --mode replay \
          --steps "$STEPS" --batch 8 --seq 256 --dim 256 --layers 4 --heads 4 --vocab 1024 --clip 0 \
          --samples 0 "${flags[@]}" 2>&1) || { echo "# $device $dtype at $t threads failed" >&2; continue; }
        echo "$t $dtype $device $(grep -o 'step_ms [0-9.]*' <<<"$out" | cut -d' ' -f2)" \
          "$(awk '/^fallbacks/ {print $2}' <<<"$out")" >>"$RESULTS"
      done
    done
  done
done
/usr/bin/python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    t, dtype, device, ms, fallbacks = line.split()
    rows.setdefault((int(t), dtype, device), []).append((float(ms), int(fallbacks)))
print("# bench/xla_bf16_step.sh: GPT-mini step_ms, median of %d rounds"
      % max(len(v) for v in rows.values()))
print("%-7s %-5s %10s %10s %7s %s" % ("threads", "dtype", "cpu", "xla", "cpu/xla", "fallbacks"))
for t, dtype in sorted({(k[0], k[1]) for k in rows}):
    med = {d: statistics.median(m for m, _ in rows.get((t, dtype, d), [(float("nan"), 0)]))
           for d in ("cpu", "xla")}
    fb = max(f for d in ("cpu", "xla") for _, f in rows.get((t, dtype, d), [(0, 0)]))
    print("%-7d %-5s %10.1f %10.1f %7.2f %d" % (t, dtype, med["cpu"], med["xla"],
                                               med["cpu"] / med["xla"], fb))
PY
