"""What every Python peer script shares: its command line (the step's
shapes and the thread count), the timing loop and the RESULT line that
bench/peers/summarize.py reads."""
import argparse
import statistics
import time


def arg_parser(description):
    """The flags every peer takes; a script adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--cases", default="mlp,gpt,sdpa,matmul")
    p.add_argument("--quick", action="store_true", help="fewer timed steps (smoke test)")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1024)
    return p


def timed(step, warmup, reps, block=lambda result: result):
    """Median wall ms of `reps` calls of step() after `warmup` calls;
    block(result) waits for work step() may leave running (JAX)."""
    times = []
    for i in range(warmup + reps):
        t0 = time.perf_counter()
        block(step())
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def report(metric, impl, ms, threads, **extra):
    fields = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"RESULT metric={metric} impl={impl} value={ms:.3f} threads={threads} {fields}",
          flush=True)
