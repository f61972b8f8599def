#!/usr/bin/env bash
# gpt_train --ddp and mnist_mlp --ddp under mpirun -np 2 (label mpi): rank 0
# alone prints (one header, one line per logged step), the header names the
# world, lazy and replay modes print the same global losses (the same
# collectives in the same graph), and --ddp in a mode without a step graph
# is refused with a message.
#
#   ddp_examples.sh MPIRUN GPT_TRAIN MNIST_MLP
set -euo pipefail
mpirun=$1 gpt_train=$2 mnist_mlp=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/out" >&2; exit 1; }
run() { OMP_NUM_THREADS=1 $mpirun -np 2 -x OMP_NUM_THREADS "$@" >"$tmp/out" 2>&1 || fail "$* exited $?"; }
losses() { awk '/^step +[0-9]+ +loss/ { print $2, $4 }' "$tmp/out"; }

for mode in lazy replay; do
  run "$gpt_train" --ddp --mode "$mode" --steps 6 --seq 16 --dim 32 --layers 1 --batch 2 --samples 0
  [[ $(grep -c "^gpt_train:" "$tmp/out") -eq 1 ]] || fail "gpt_train: not one header ($mode)"
  grep -q "^data parallel: 2 ranks x batch 2" "$tmp/out" || fail "gpt_train: no 'data parallel: 2 ranks' ($mode)"
  [[ $(losses | wc -l) -eq 6 ]] || fail "gpt_train: not 6 step lines ($mode)"
  grep -q "^6 steps in .* tokens/s" "$tmp/out" || fail "gpt_train: no tokens/s summary ($mode)"
  losses >"$tmp/gpt_$mode"
done
cmp -s "$tmp/gpt_lazy" "$tmp/gpt_replay" || { paste "$tmp/gpt_lazy" "$tmp/gpt_replay" >&2; fail "gpt_train: lazy and replay losses differ"; }

for mode in lazy replay; do
  run "$mnist_mlp" --ddp --synthetic --mode "$mode" --max-steps 25 --log-every 5
  grep -q "^data parallel: 2 ranks x batch 200" "$tmp/out" || fail "mnist_mlp: no 'data parallel: 2 ranks' ($mode)"
  [[ $(grep -c "samples/s" "$tmp/out") -eq 6 ]] || fail "mnist_mlp: not 6 step lines (1, 5, ..., 25) ($mode)"
  awk '/samples\/s/ { print $4, $6 }' "$tmp/out" >"$tmp/mnist_$mode"
done
cmp -s "$tmp/mnist_lazy" "$tmp/mnist_replay" || { paste "$tmp/mnist_lazy" "$tmp/mnist_replay" >&2; fail "mnist_mlp: lazy and replay losses differ"; }

rc=0
"$gpt_train" --ddp --mode graphed --steps 1 >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "gpt_train: --ddp works in lazy and replay modes, not graphed" "$tmp/out" ||
  fail "gpt_train --ddp --mode graphed: exit $rc, no refusal"
rc=0
"$mnist_mlp" --ddp --mode cacher >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "mnist_mlp: --ddp works in lazy and replay modes, not cacher" "$tmp/out" ||
  fail "mnist_mlp --ddp --mode cacher: exit $rc, no refusal"
echo "ddp examples: ok"
