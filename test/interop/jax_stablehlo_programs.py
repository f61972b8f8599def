"""StableHLO in, the client side: JAX lowers two programs that no one here
wrote against mstep's ops and runs them itself, as the reference.

  jax_stablehlo_programs.py --dir DIR

writes, per program P (mlp_step, transformer_forward):
  DIR/P.stablehlo.mlir       the module as jax.jit(f).lower(...).as_text()
                             prints it (the pretty op form)
  DIR/P.generic.mlir         the same in MLIR's generic op form
                             (compiler_ir('stablehlo') ... get_asm(
                             print_generic_op_form=True)); mstep reads both
  DIR/P.inputs.safetensors   the arguments, "arg<i>"
  DIR/P.expected.safetensors JAX's results, "step<s>.result<i>", and metadata:
                             steps, and per result its tolerance "tol.result<i>"

mlp_step is one training step (2-layer MLP, softmax cross-entropy on
one-hot labels, jax.value_and_grad, hand-written SGD) lowered with the
parameters donated; it runs 3 steps, each feeding the new parameters back
(the import_worker does the same through the module's tf.aliasing_output).
transformer_forward is one pre-LN transformer block (4-head causal
attention, tanh-GELU MLP) plus the final LayerNorm, run once; two of its
weights are closed over, so the module holds them as constants.

Tolerances, per result, from the ops: both sides compute in f32 but may
sum in another order (dot_general and reduce) and round exp/log/tanh/rsqrt
to within a few ulp. Summing K terms in another order changes the result
by at most about K * u * sum|terms| (u = 2^-24, the f32 unit roundoff);
a result that passes through D such reductions in sequence (forward,
backward, update; steps feed back) can differ by about D * K * u times the
magnitudes involved. So each result is compared elementwise with
|got - want| <= D * K * u * scale, where K is the program's longest
reduction, D its depth in reductions (counted below) and scale the largest
magnitude of that result over the steps (at least 1, since the sums run
over terms of magnitude about 1: inputs and weights are O(1)).
"""
import argparse
import json
import os
import struct

import jax
import jax.numpy as jnp
import numpy as np

U = 2.0 ** -24


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32", np.dtype(np.bool_): "BOOL"}
    for name in sorted(tensors):
        a = np.asarray(tensors[name])  # ascontiguousarray would make 0-d 1-d
        blob = a.tobytes(order="C")
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save(out_dir, name, fn, args, steps, donate, depth, longest):
    lowered = jax.jit(fn, donate_argnums=donate).lower(*args)
    generic = lowered.compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True)
    with open(os.path.join(out_dir, name + ".stablehlo.mlir"), "w") as f:
        f.write(lowered.as_text())
    with open(os.path.join(out_dir, name + ".generic.mlir"), "w") as f:
        f.write(generic)
    write_safetensors(os.path.join(out_dir, name + ".inputs.safetensors"),
                      {f"arg{i}": np.asarray(a) for i, a in enumerate(args)}, {})
    compiled = jax.jit(fn)  # no donation here: the args are reused below
    expected, scale = {}, {}
    current = [jnp.asarray(a) for a in args]
    for s in range(steps):
        results = compiled(*current)
        for i, r in enumerate(results):
            r = np.asarray(r)
            expected[f"step{s}.result{i}"] = r
            scale[i] = max(scale.get(i, 1.0), float(np.max(np.abs(r))) if r.size else 1.0)
        # The step's donated arguments take the results they are donated to:
        # the parameters, results 1.. in order.
        for k, arg in enumerate(donate):
            current[arg] = results[1 + k]
    meta = {"steps": steps}
    for i, sc in scale.items():
        meta[f"tol.result{i}"] = depth * longest * U * sc
    write_safetensors(os.path.join(out_dir, name + ".expected.safetensors"), expected, meta)


def mlp_step(w1, b1, w2, b2, x, y):
    def loss_fn(params):
        w1, b1, w2, b2 = params
        h = jnp.maximum(x @ w1 + b1, 0.0)
        logits = h @ w2 + b2
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.sum(y * logp, axis=-1))

    params = (w1, b1, w2, b2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return (loss,) + tuple(p - 0.1 * g for p, g in zip(params, grads))


HEADS = 4


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def transformer_forward(x, ln1_g, ln1_b, w_qkv, w_o, ln2_g, ln2_b, w_1, b_1, w_2, b_2, lnf_g,
                        lnf_b):
    batch, seq, dim = x.shape
    hd = dim // HEADS
    h = layer_norm(x, ln1_g, ln1_b)
    q, k, v = jnp.split(h @ w_qkv, 3, axis=-1)
    heads = lambda t: t.reshape(batch, seq, HEADS, hd).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, -1e9)
    attn = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bhqd", attn, v).transpose(0, 2, 1, 3).reshape(batch, seq, dim)
    x = x + out @ w_o
    h = layer_norm(x, ln2_g, ln2_b)
    x = x + jax.nn.gelu(h @ w_1 + b_1, approximate=True) @ w_2 + b_2
    return (layer_norm(x, lnf_g, lnf_b),)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    out_dir = parser.parse_args().dir
    rng = np.random.default_rng(20)
    f32 = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(np.float32)

    batch, features, hidden, classes = 16, 32, 64, 10
    labels = rng.integers(0, classes, batch)
    mlp_args = (f32(features, hidden, s=features ** -0.5), f32(hidden, s=0.1),
                f32(hidden, classes, s=hidden ** -0.5), f32(classes, s=0.1),
                f32(batch, features), np.eye(classes, dtype=np.float32)[labels])
    # Depth: forward 2 matmuls + 2 reductions (softmax, mean), backward 3
    # matmuls + bias sums, the update; 3 steps feed back. Longest
    # reduction: the hidden width (64).
    save(out_dir, "mlp_step", mlp_step, mlp_args, steps=3, donate=(0, 1, 2, 3),
         depth=3 * 10, longest=hidden)

    b, t, d = 2, 8, 32
    ones = lambda n: np.ones(n, np.float32) + f32(n, s=0.05)
    tf_args = (f32(b, t, d), ones(d), f32(d, s=0.05), f32(d, 3 * d, s=d ** -0.5),
               f32(d, d, s=d ** -0.5), ones(d), f32(d, s=0.05), f32(d, 4 * d, s=d ** -0.5),
               f32(4 * d, s=0.05), f32(4 * d, d, s=(4 * d) ** -0.5), f32(d, s=0.05), ones(d),
               f32(d, s=0.05))
    # The MLP's output weights (4096 values) and the final LayerNorm's gain
    # (32 values) are closed over, as a model's weights often are: JAX
    # writes them into the module as constants.
    closed_w_2, closed_lnf_g = tf_args[9], tf_args[11]

    def transformer_closed(x, ln1_g, ln1_b, w_qkv, w_o, ln2_g, ln2_b, w_1, b_1, b_2, lnf_b):
        return transformer_forward(x, ln1_g, ln1_b, w_qkv, w_o, ln2_g, ln2_b, w_1, b_1,
                                   closed_w_2, b_2, closed_lnf_g, lnf_b)

    open_args = tf_args[:9] + (tf_args[10], tf_args[12])
    # Depth: 3 LayerNorms (2 reductions each), qkv, scores, softmax (2),
    # attention-values, out projection, 2 MLP matmuls: about 14. Longest
    # reduction: the MLP's 4 * d = 128. The final LayerNorm divides by a
    # standard deviation of about 1, so no error is amplified.
    save(out_dir, "transformer_forward", transformer_closed, open_args, steps=1, donate=(),
         depth=14, longest=4 * d)


if __name__ == "__main__":
    main()
