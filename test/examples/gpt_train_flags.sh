#!/usr/bin/env bash
# gpt_train's benchmark flags (bench/peers.sh): --padding 0 trains on
# full-length windows without valid_seq_len, --clip 0 turns clipping off,
# in replay mode and with attention written out; --padding 0 in a mode that
# takes the lengths as a graph input is refused with a message that says
# what to do.
#
#   gpt_train_flags.sh GPT_TRAIN
set -euo pipefail
gpt_train=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/out" >&2; exit 1; }

for extra in "" "--explicit-attention 1"; do
  # shellcheck disable=SC2086
  "$gpt_train" --steps 4 --seq 16 --dim 32 --layers 1 --batch 2 --samples 0 --mode replay \
    --padding 0 --clip 0 $extra >"$tmp/out" 2>&1 || fail "gpt_train --padding 0 --clip 0 $extra exited $?"
  grep -q "batch 2 x seq 16 (full length), AdamW + warmup/cosine, clip off" "$tmp/out" ||
    fail "the header does not say full length and clip off ($extra)"
  grep -q "step_ms" "$tmp/out" || fail "no step_ms line ($extra)"
  # Full-length windows: every step sees batch * seq = 32 tokens.
  grep -q "^4 steps in .* tokens/s" "$tmp/out" || fail "no summary line ($extra)"
done

rc=0
"$gpt_train" --steps 2 --padding 0 --mode graphed >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--padding 0 --mode graphed exited $rc, expected 2"
grep -q "gpt_train: --padding 0 works in lazy and replay modes (graphed mode takes the lengths as a graph input); drop --padding 0 or use --mode replay" "$tmp/out" ||
  fail "the refusal does not name the flag, the mode and what to do"
echo "gpt_train flags: ok"
