"""Turns bench/peers.sh's RESULT lines into its table (standard library only).

Input lines: `round=<r> RESULT metric=<m> impl=<i> value=<v> threads=<n> [params=<p>] [loss=<a>-><b>]`.
Each figure is the median over the rounds. Output, one line per metric,
peer and thread setting:

    metric[peer]  mstep  peer  ratio  threads

ratio is peer/mstep for times (_ms) and mstep/peer for rates (_gbps,
_gflops...), so ratio > 1 means mstep is faster. threads is M/P for equal
counts and best:M/P for each side at its fastest setting.

    python3 bench/peers/summarize.py RESULTS [--quick 0|1] [--mine IMPL] [--same-inputs]
        [--title SCRIPT]

--mine names the impl in the mstep column (default "mstep"; bench/xla_peers.sh
passes mstep-xla, and mstep-cpu is then one of the peers). --same-inputs says
every side ran the same steps on the same data from the same weights
(bench/xla_peers.sh), so the sanity lines also check that the losses agree.
"""
import argparse
import datetime
import os
import platform
import statistics
from collections import defaultdict

# mstep-only metrics compared with another mstep figure instead of a peer.
MSTEP_AGAINST_MSTEP = {"gpt_padded_step_ms": ("gpt_step_ms", "mstep-full-length")}
# Metrics whose peer is not the same computation: equal threads only.
EQUAL_THREADS_ONLY = {"sdpa_gflops_vs_matmul"}


def parse(path):
    """{(metric, impl, threads): [values]} and the last extra fields of each."""
    values, extras = defaultdict(list), {}
    for line in open(path):
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        key = (fields["metric"], fields["impl"], int(fields["threads"]))
        values[key].append(float(fields["value"]))
        extras[key] = {k: v for k, v in fields.items() if k in ("params", "loss")}
    return values, extras


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def is_time(metric):
    return metric.endswith("_ms") or metric.endswith("_per_op")


def fastest(metric, by_threads):
    """The thread count with the best figure."""
    pick = min if is_time(metric) else max
    return pick(by_threads, key=by_threads.get)


def ratio(metric, mstep, peer):
    if is_time(metric):
        return peer / mstep
    return mstep / peer


def losses_agree(losses, rtol=1e-4):
    """Whether "first->last" losses of sides that ran the same steps agree:
    f32 rounding in other summation orders moves a loss by ~1e-6 relative
    (test/interop/run_stablehlo.py measures it); rtol leaves 100x room."""
    pairs = [tuple(float(x) for x in loss.split("->")) for loss in losses]
    if len(pairs) < 2:
        return "not compared (fewer than two sides)"
    for i in range(2):
        values = [p[i] for p in pairs]
        if max(values) - min(values) > rtol * max(abs(v) for v in values):
            return f"DIFFER beyond rtol {rtol:g}: not the same work on every side"
    return f"agree within rtol {rtol:g} on all {len(pairs)} sides (first and last step)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--quick", type=int, default=0)
    p.add_argument("--mine", default="mstep")
    p.add_argument("--same-inputs", action="store_true")
    p.add_argument("--title", default="bench/peers.sh")
    a = p.parse_args()
    values, extras = parse(a.results)
    med = {k: statistics.median(v) for k, v in values.items()}
    rounds = max((len(v) for v in values.values()), default=0)

    print(f"# {a.title} on {cpu_model()}, {os.cpu_count()} cores, "
          f"{datetime.date.today().isoformat()}; median of {rounds} round(s)"
          + ("; --quick: a smoke test, not figures to quote" if a.quick else ""))
    print("# ratio = peer/mstep for times (_ms, _per_op), mstep/peer for rates (_gbps, _gflops): "
          "> 1 means mstep is faster")
    print("# threads: mstep/peer thread counts; best:M/P = each side at its fastest setting")
    print(f"{'metric[peer]':52} {a.mine:>10} {'peer':>10} {'ratio':>7}  threads")

    def row(name, m, pv, threads, metric):
        print(f"{name:52} {m:10.4g} {pv:10.4g} {ratio(metric, m, pv):7.2f}  {threads}")

    metrics = list(dict.fromkeys(k[0] for k in med))
    for metric in metrics:
        mine = {t: v for (m, i, t), v in med.items() if m == metric and i == a.mine}
        if not mine:
            continue
        peers = defaultdict(dict)
        for (m, i, t), v in med.items():
            if m == metric and i != a.mine:
                peers[i][t] = v
        if metric in MSTEP_AGAINST_MSTEP:  # the peer is another mstep figure
            other, label = MSTEP_AGAINST_MSTEP[metric]
            peers[label] = {t: v for (m, i, t), v in med.items()
                            if m == other and i == "mstep" and t in mine}
        if not peers:  # a figure without a peer
            for t, v in sorted(mine.items()):
                print(f"{metric + '[no peer]':52} {v:10.4g} {'-':>10} {'-':>7}  {t}")
            continue
        for impl, theirs in peers.items():
            name = f"{metric}[{impl}]"
            for t in sorted(set(mine) & set(theirs)):
                row(name, mine[t], theirs[t], f"{t}/{t}", metric)
            if metric in EQUAL_THREADS_ONLY or len(mine) + len(theirs) <= 2:
                continue
            best_m, best_p = fastest(metric, mine), fastest(metric, theirs)
            row(name, mine[best_m], theirs[best_p], f"best:{best_m}/{best_p}", metric)

    # Like for like: the same model on each side, and losses that move alike.
    print("# sanity (last round, highest thread count): parameters and loss first->last step")
    for metric in ("mlp_step_ms", "gpt_step_ms"):
        keys = sorted(k for k in extras if k[0] == metric and extras[k])
        top = max((k[2] for k in keys), default=None)
        for key in keys:
            if key[2] == top:
                e = extras[key]
                print(f"#   {metric:12} {key[1]:28} params {e.get('params', '?'):>9}  "
                      f"loss {e.get('loss', '?')}")
        if a.same_inputs:
            losses = [extras[k]["loss"] for k in keys if "loss" in extras[k]]
            print(f"#   {metric}: losses {losses_agree(losses)}")


if __name__ == "__main__":
    main()
