#!/usr/bin/env bash
# mnist_mlp on --device xla (the whole step as one native function) trains
# like on cpu: in lazy and in replay mode, every step's printed loss (6
# decimals) is cpu's (the same f32 math: the same oneDNN matmul primitives
# with the same bias/relu epilogues, the loss and update loops as cpu's
# kernels), and a
# replayed step is two executables (the gradient graph and the optimizer
# update), each one call, and no graph of the step calls out to a cpu
# kernel (MSTEP_LOG_FALLBACK=1 lists callouts per compile). gpt_train prints
# cpu's losses (4 decimals) in both modes, and its steps call out for
# nothing either (attention is a loop nest in the function). Under
# --autocast bf16 neither, and 20 steps print cpu's losses: a bf16 matmul
# whose bias, gelu or residual the cpu backend adds in its oneDNN epilogue
# (before the one rounding) runs the same epilogue in the xla step.
#
#   xla_examples.sh MNIST_MLP GPT_TRAIN
set -euo pipefail
mnist_mlp=$1
gpt_train=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f ${2:-} ]] && cat "$2" >&2; exit 1; }

# Exit status 1 only says a short run stayed under the 50% accuracy bar.
run_ok() {
  local out=$1
  shift
  local rc=0
  "$@" >"$out" 2>&1 || rc=$?
  [[ $rc -eq 0 || $rc -eq 1 ]] || fail "$* exited $rc" "$out"
}

for mode in lazy replay; do
  for device in cpu xla; do
    MSTEP_LOG_FALLBACK=1 run_ok "$tmp/$device.$mode" "$mnist_mlp" --synthetic --device "$device" --mode "$mode" \
      --max-steps 12 --log-every 4 --print-losses
    grep -q "^step 12 loss " "$tmp/$device.$mode" || fail "$device $mode: no losses" "$tmp/$device.$mode"
  done
  /usr/bin/python3 - "$tmp/cpu.$mode" "$tmp/xla.$mode" <<'PY' || fail "xla $mode: losses differ from cpu" "$tmp/xla.$mode"
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+ loss ([-0-9.e]+)$", open(path).read(), re.M)]
want, got = losses(sys.argv[1]), losses(sys.argv[2])
assert len(want) == 12 and len(got) == 12, (len(want), len(got))
for i, (w, g) in enumerate(zip(want, got)):
    assert w == g, ("step", i + 1, w, g)
PY
done
grep -q "^replay graph: 2 segments, 2 kernels" "$tmp/xla.replay" ||
  fail "xla replay: a segment is not one call" "$tmp/xla.replay"
for mode in lazy replay; do
  if grep "calls out" "$tmp/xla.$mode"; then fail "mnist_mlp xla $mode: the step calls out" "$tmp/xla.$mode"; fi
done

for mode in lazy replay; do
  for device in cpu xla; do
    MSTEP_LOG_FALLBACK=1 "$gpt_train" --steps 4 --mode "$mode" --device "$device" --samples 0 >"$tmp/gpt.$device.$mode" 2>&1 ||
      fail "gpt_train --device $device --mode $mode failed" "$tmp/gpt.$device.$mode"
    grep -E "^step +[0-9]+ +loss" "$tmp/gpt.$device.$mode" | awk '{print $2, $4}' >"$tmp/gpt.$device.$mode.losses"
  done
  [[ $(wc -l <"$tmp/gpt.xla.$mode.losses") -eq 4 ]] || fail "gpt_train xla $mode: no losses" "$tmp/gpt.xla.$mode"
  cmp -s "$tmp/gpt.cpu.$mode.losses" "$tmp/gpt.xla.$mode.losses" ||
    fail "gpt_train $mode: xla's losses differ from cpu's" "$tmp/gpt.xla.$mode"
  if grep "calls out" "$tmp/gpt.xla.$mode"; then
    fail "gpt_train xla $mode: the step calls out" "$tmp/gpt.xla.$mode"
  fi
done

for device in cpu xla; do
  MSTEP_LOG_FALLBACK=1 "$gpt_train" --steps 20 --device "$device" --autocast bf16 --samples 0 \
    >"$tmp/gpt_bf16.$device" 2>&1 || fail "gpt_train --device $device --autocast bf16 failed" "$tmp/gpt_bf16.$device"
done
if grep -E "calls out|mstep fallback" "$tmp/gpt_bf16.xla"; then
  fail "gpt_train xla --autocast bf16: the step calls out" "$tmp/gpt_bf16.xla"
fi
for device in cpu xla; do
  grep -E "^step +[0-9]+ +loss" "$tmp/gpt_bf16.$device" | awk '{print $2, $4}' >"$tmp/gpt_bf16.$device.losses"
done
[[ $(wc -l <"$tmp/gpt_bf16.xla.losses") -eq 20 ]] || fail "gpt_train xla --autocast bf16: no losses" "$tmp/gpt_bf16.xla"
cmp -s "$tmp/gpt_bf16.cpu.losses" "$tmp/gpt_bf16.xla.losses" ||
  fail "gpt_train --autocast bf16: xla's losses differ from cpu's $(diff "$tmp/gpt_bf16.cpu.losses" "$tmp/gpt_bf16.xla.losses" | head -4)" "$tmp/gpt_bf16.xla"
