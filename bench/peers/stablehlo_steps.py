"""XLA:CPU (jaxlib) and IREE (llvm-cpu) running the training step that mstep
exported as StableHLO (bench/xla_step_bench --export DIR), for
bench/xla_peers.sh: the same module, starting values and batches as mstep's
replays, step after step, each step's results fed back as the next step's
state (on the device: no copy to the host but the loss). The consumers are
test/interop/run_stablehlo.py's (compiled as the interop tests compile
them).

    stablehlo_steps.py --consumer jax|iree --dir DIR --metric mlp|gpt --threads N --steps S

Prints RESULT lines (bench/peers/summarize.py):
  <metric>_step_ms     median wall ms of steps 2..S (arguments in, step,
                       loss read back), with the loss of step 1 and step S
  <metric>_compile_ms  compiling the module (once)

Threads: the process is pinned to N cores by bench/xla_peers.sh (XLA:CPU
has no thread-count flag; see jax_steps.py); IREE's local-task driver gets
--task_topology_max_group_count=N as well. The script refuses to run when
its CPU affinity does not match --threads.
"""
import argparse
import importlib.metadata
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test",
                                "interop"))
import run_stablehlo  # noqa: E402  (the interop tests' consumers)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--consumer", choices=["jax", "iree"], required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--metric", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    a = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    if cores != a.threads:
        sys.exit(f"stablehlo_steps: pinned to {cores} cores, not --threads {a.threads} "
                 "(run it under taskset, as bench/xla_peers.sh does)")
    if a.consumer == "iree":
        import iree.runtime
        iree.runtime.flags.parse_flags(f"--task_topology_max_group_count={a.threads}")
        impl = f"iree-{importlib.metadata.version('iree-base-runtime')}-llvm-cpu"
    else:
        import jax
        impl = f"xla-cpu-jax-{jax.__version__}"
    step = run_stablehlo.Exported(a.dir)
    t0 = time.perf_counter()
    consumer = (run_stablehlo.Jax if a.consumer == "jax" else run_stablehlo.Iree)(step.text)
    compile_ms = (time.perf_counter() - t0) * 1e3
    losses, times = [], []
    for i in range(a.steps):
        t0 = time.perf_counter()
        outs = consumer.call(step.args(i))
        for name, value in zip(step.result_names, outs):
            step.state[name] = value
        loss = step.state["loss"]
        losses.append(float(np.asarray(loss.to_host() if hasattr(loss, "to_host") else loss)))
        times.append((time.perf_counter() - t0) * 1e3)
    ms = statistics.median(times[1:] if len(times) > 1 else times)
    print(f"RESULT metric={a.metric}_step_ms impl={impl} value={ms:.3f} threads={a.threads} "
          f"loss={losses[0]:.5f}->{losses[-1]:.5f}", flush=True)
    print(f"RESULT metric={a.metric}_compile_ms impl={impl} value={compile_ms:.1f} "
          f"threads={a.threads}", flush=True)


if __name__ == "__main__":
    main()
