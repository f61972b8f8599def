"""Runs a training step that mstep exported as StableHLO on a real consumer,
XLA:CPU (jaxlib) or IREE (iree-compile, llvm-cpu, iree.runtime), step
after step, and compares the losses and weights with mstep's ref backend.

  run_stablehlo.py --consumer jax|iree --dir DIR --steps N [--noise NAME:BEGIN:END:BOUND]

DIR holds what `mstep_export_worker stablehlo DIR N` writes:
  step.stablehlo.mlir    the step (Graph::export_stablehlo): @main's
                         arguments and results carry mstep.name / mstep.role,
                         donated arguments tf.aliasing_output
  values.safetensors     every argument's value before the first step, and
                         metadata rng_seed, rng_offset, rng_advance
  inputs.safetensors     the batches: x [N, ...], y [N, ...]
  expected.safetensors   ref's loss [N] and each weight after each step [N, ...]
                         (or, for the creation ops, each output per step)

Each step feeds the batch, the RNG state (seed, offset + i * advance: what a
replay passes) and the state the previous step returned (results are fed
back to the argument of the same name), as mstep's replay does.

Tolerances. The dropout masks are bit-identical (the export draws mstep's
Philox stream in integer ops), so every difference is f32 rounding: XLA and
IREE sum the dot products and reductions in other orders than ref (K = 784
terms: about sqrt(K) * 2^-24 ~ 2e-6 relative on a dot product), and one
Adadelta step moves a weight by O(1e-3) (lr 0.1 times a ratio of square
roots), so a rounding difference in a gradient reaches the weight scaled
down by about that much. Measured on both consumers: mnist_mlp |diff| <=
1e-8 on the weights (O(0.03)) and <= 3e-7 on the loss (O(2)); GPT-mini
(layer norms, attention, AdamW) <= 5e-7 on the weights (O(1) for the norms
and embeddings) and <= 5e-7 on the loss (O(3.6)). Bounds: loss rtol 1e-5,
weights atol 1e-6 + rtol 1e-5, 20x or more above what was measured.
Shifting the dropout stream by one element moves the loss by 4e-2 and the
weights by 1e-3, far outside; every step is checked, so an error cannot
average out. The creation ops get the weights' bounds: rand and arange
come out bitwise, randn within 5e-7 on values up to 3 (its log and cos
differ by an ulp between math libraries).

Outputs that are not floats (argmax's indices) must be equal exactly;
--tol ATOL:RTOL sets the float bounds (default 1e-6:1e-5, the weights'
above); a NaN matches only a NaN.

--noise names a flat range of a weight whose true gradient is zero, so its
computed gradient is rounding noise and an Adam-type update, which divides
by the gradient's own magnitude, turns that noise into steps of up to the
learning rate in either direction on any two machines. GPT-mini's key bias
(the middle third of blocks.0.qkv.bias) is one: softmax is invariant to the
same shift of every score of a row, so the key bias cannot change the loss.
There the bound is BOUND * (step + 1) (the learning rate per step); every
other element keeps the tight bounds above.
"""
import argparse
import json
import re
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
          "BOOL": np.bool_, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(data[base + begin:base + end],
                                      dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return tensors, meta


def signature(text):
    """@main's argument names and result names, from the exported text."""
    m = re.search(r"func\.func public @main\((.*?)\) -> \((.*?)\) \{\n", text)
    if not m:
        sys.exit("run_stablehlo: the module has no 'func.func public @main(...) -> (...)'")
    args = re.findall(r'%arg\d+: tensor<[^>]*> \{[^}]*mstep\.name = "([^"]*)"', m.group(1))
    results = re.findall(r'tensor<[^>]*> \{mstep\.name = "([^"]*)"\}', m.group(2))
    return args, results


class Exported:
    """What `export_worker` (or bench/xla_step_bench) wrote into a
    directory: the module's text, @main's argument and result names, the
    state (argument values by name, updated by the caller from each step's
    results) and the batches."""

    def __init__(self, directory):
        self.text = open(f"{directory}/step.stablehlo.mlir").read()
        self.arg_names, self.result_names = signature(self.text)
        self.state, meta = read_safetensors(f"{directory}/values.safetensors")
        self.batches, _ = read_safetensors(f"{directory}/inputs.safetensors")
        self.rng = tuple(int(meta[k]) for k in ("rng_seed", "rng_offset", "rng_advance"))

    def args(self, i):
        """Step i's arguments: its batch, the RNG state a replay passes
        (seed, offset + i * advance) and the current state."""
        seed, offset, advance = self.rng
        args = []
        for name in self.arg_names:
            if name in self.batches:
                args.append(self.batches[name][i])
            elif name == "rng_state":
                args.append(np.array([seed, offset + i * advance], dtype=np.int64))
            else:
                args.append(self.state[name])
        return args


class Jax:
    name = "XLA:CPU (jaxlib)"

    def __init__(self, text):
        import jax
        jax.config.update("jax_enable_x64", True)  # i64 and f64 arguments stay as they are
        from jax.extend import backend
        from jax._src.lib import xla_client
        self.jax = jax
        client = backend.get_backend("cpu")
        devices = xla_client.DeviceList(tuple(client.local_devices()[:1]))
        self.exe = client.compile_and_load(text, devices, xla_client.CompileOptions())

    def call(self, args):
        """The results as device arrays (bench/peers/stablehlo_steps.py
        feeds them back without a copy to the host)."""
        return self.exe.execute([self.jax.device_put(a) for a in args])

    def run(self, args):
        return [np.asarray(o) for o in self.call(args)]


class Iree:
    name = "IREE (llvm-cpu)"

    def __init__(self, text):
        import iree.compiler as compiler
        import iree.runtime as rt
        vmfb = compiler.compile_str(
            text, target_backends=["llvm-cpu"], input_type="stablehlo",
            # f64 device scalars (learning rates) stay f64, as in mstep.
            extra_args=["--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false"])
        config = rt.Config("local-task")
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
        self.main = ctx.modules.mstep["main"]

    def call(self, args):
        """The results as device arrays (see Jax.call)."""
        out = self.main(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def run(self, args):
        return [np.asarray(o.to_host()) for o in self.call(args)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--consumer", choices=["jax", "iree"], required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--noise", action="append", default=[])
    p.add_argument("--tol", default="1e-6:1e-5",
                   help="ATOL:RTOL of the float values that --noise does not name")
    a = p.parse_args()
    atol, rtol = (float(v) for v in a.tol.split(":"))
    noise = {}
    for spec in a.noise:
        name, begin, end, bound = spec.split(":")
        noise[name] = (int(begin), int(end), float(bound))
    step = Exported(a.dir)
    state = step.state
    expected, _ = read_safetensors(f"{a.dir}/expected.safetensors")
    consumer = (Jax if a.consumer == "jax" else Iree)(step.text)
    result_names = step.result_names

    failures = 0
    for i in range(a.steps):
        outs = consumer.run(step.args(i))
        if len(outs) != len(result_names):
            sys.exit(f"run_stablehlo: {consumer.name} returned {len(outs)} results, "
                     f"the signature has {len(result_names)}")
        for name, value in zip(result_names, outs):
            state[name] = value
        checks = [("loss", state["loss"], expected["loss"][i], 0.0, 1e-5)] if "loss" in expected else []
        for w in sorted(expected):
            if w == "loss":
                continue
            if not np.issubdtype(expected[w].dtype, np.floating):
                # Indices and flags: exactly.
                checks.append((w, state[w].reshape(-1), expected[w][i].reshape(-1), 0.0, 0.0))
                continue
            got = state[w].astype(np.float32).reshape(-1)
            want = expected[w][i].reshape(-1)
            if w in noise:
                begin, end, bound = noise[w]
                checks.append((f"{w}[{begin}:{end}]", got[begin:end], want[begin:end],
                               bound * (i + 1), 0.0))
                got = np.concatenate([got[:begin], got[end:]])
                want = np.concatenate([want[:begin], want[end:]])
            checks.append((w, got, want, atol, rtol))
        for name, got, want, atol, rtol in checks:
            err = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0)
            # NaN where ref has NaN (a pool over NaNs) is equal.
            ok = (np.array_equal(got, want) if atol == 0 and rtol == 0
                  else np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True))
            print(f"step {i} {name:12s} max |{a.consumer} - ref| = {err:.3e} "
                  f"(atol {atol:g}, rtol {rtol:g}){'' if ok else '  FAIL'}")
            failures += not ok
        if "loss" in expected:
            print(f"step {i} loss {consumer.name} {float(state['loss']):.7f} "
                  f"ref {float(expected['loss'][i]):.7f}")
    if failures:
        sys.exit(f"run_stablehlo: {failures} comparisons out of tolerance on {consumer.name}")
    print(f"{consumer.name}: {a.steps} steps equal to mstep's ref backend within tolerance")


if __name__ == "__main__":
    main()
