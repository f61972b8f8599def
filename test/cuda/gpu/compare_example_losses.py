#!/usr/bin/env python3
"""Compares an example's printed losses on the GPU with ref's (gpu_check.sh).

    compare_example_losses.py REF LAZY REPLAY REL_TOLERANCE

Each file is the example's stdout: a line per step with "step N  loss X"
(gpt_train) or "epoch E step N  loss X" (mnist_mlp with --log-every 1).
Lazy and replayed losses on the GPU must be equal as printed (the same
kernels, the same Philox numbers per replay: issue 22 asks for equality
with lazy mode); both must be within REL_TOLERANCE * |ref's loss| of
ref's for the steps ref ran. Exit status 0 when all hold.
"""
import re
import sys

STEP = re.compile(r"^(?:epoch \d+ )?step +(\d+) +loss +([-+0-9.eEnaif]+)")


def losses(path):
    found = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = STEP.match(line)
            if m:
                found[int(m.group(1))] = m.group(2)
    return found


def main(ref_path, lazy_path, replay_path, tolerance):
    tolerance = float(tolerance)
    ref, lazy, replay = losses(ref_path), losses(lazy_path), losses(replay_path)
    failures = []
    if not lazy or not replay:
        failures.append("no loss printed (lazy %d steps, replay %d)" % (len(lazy), len(replay)))
    if sorted(lazy) != sorted(replay):
        failures.append("lazy printed steps %s, replay %s" % (sorted(lazy), sorted(replay)))
    worst = 0.0
    for step in sorted(lazy):
        a, b = lazy[step], replay.get(step)
        if b is not None and a != b:
            failures.append("step %d: lazy loss %s, replayed %s" % (step, a, b))
        if step in ref:
            r = float(ref[step])
            error = abs(float(a) - r)
            bound = tolerance * abs(r)
            worst = max(worst, error / bound if bound > 0 else float("inf") if error else 0.0)
            if not error <= bound:
                failures.append("step %d: loss %s, ref's %s (|diff| %.3g > %.3g)"
                                % (step, a, ref[step], error, bound))
    compared = len([s for s in lazy if s in ref])
    print("%d steps lazy = replayed as printed; %d against ref, worst %.3f of the bound %g x |ref|"
          % (len(lazy), compared, worst, tolerance))
    for f in failures:
        print("  " + f)
    return 1 if failures or compared == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
