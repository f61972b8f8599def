"""JAX (jax.jit on XLA:CPU) peers of mstep's MLP step, GPT-mini step, SDPA
and matmul (bench/peers.sh): the models of torch_steps.py, written with jax.numpy
and optax, each whole step (forward, backward, optimizer update) one jitted
function. Prints the RESULT lines torch_steps.py prints.

XLA:CPU has no flag that sets its thread count: the old
`--xla_cpu_multi_thread_eigen=false` is still accepted but made no
measurable difference here. So --threads N means the process is pinned to N
cores (bench/peers.sh runs every side under `taskset -c 0-(N-1)`), which
bounds it to N cores whatever pools it makes; the script refuses to run when
its CPU affinity does not match --threads.

    python3 bench/peers/jax_steps.py --threads N [--cases mlp,gpt,sdpa,matmul] [--quick]
"""
import math
import os
import sys

import jax
import jax.numpy as jnp
import optax

import peer_common


def timed(step, warmup, reps):
    return peer_common.timed(step, warmup, reps, block=jax.block_until_ready)


def report(metric, ms, threads, **extra):
    peer_common.report(metric, f"jax-{jax.__version__}-jit", ms, threads, **extra)


def report_training_step(metric, one, warmup, reps, threads, params, losses):
    """Times one() (a training step that appends its loss to `losses`) and
    reports it with the parameter count and the first and last loss."""
    ms = timed(one, warmup=warmup, reps=reps)
    report(metric, ms, threads, params=n_params(params),
           loss=f"{losses[0]:.3f}->{losses[-1]:.3f}")


def n_params(params):
    return sum(x.size for x in jax.tree_util.tree_leaves(params))


def linear(key, fan_in, fan_out, bias=True):
    bound = 1 / math.sqrt(fan_in)  # nn.Linear's default init
    kw, kb = jax.random.split(key)
    p = {"w": jax.random.uniform(kw, (fan_in, fan_out), jnp.float32, -bound, bound)}
    if bias:
        p["b"] = jax.random.uniform(kb, (fan_out,), jnp.float32, -bound, bound)
    return p


def apply_linear(p, x):
    y = x @ p["w"]
    return y + p["b"] if "b" in p else y


def layer_norm(p, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def causal_attention(q, k, v):
    """Written out: matmul, causal mask, softmax, matmul (XLA fuses what it can)."""
    s = q.shape[-2]
    scores = (q @ jnp.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


def run_mlp(reps, threads):
    k1, k2, kd = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"fc1": linear(k1, 784, 128), "fc2": linear(k2, 128, 10)}
    opt = optax.adadelta(learning_rate=0.1, rho=0.9, eps=1e-6)
    state = opt.init(params)

    def loss_fn(params, x, y, key):
        h = jax.nn.relu(apply_linear(params["fc1"], x))
        keep = jax.random.bernoulli(key, 0.5, h.shape)  # Dropout(0.5)
        logp = jax.nn.log_softmax(apply_linear(params["fc2"], jnp.where(keep, h / 0.5, 0)))
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    @jax.jit
    def step(params, state, x, y, key):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y, key)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    data_keys = jax.random.split(jax.random.PRNGKey(1), 8)
    xs = [jax.random.normal(k, (200, 784)) for k in data_keys]
    ys = [jax.random.randint(k, (200,), 0, 10) for k in data_keys]
    box = {"params": params, "state": state, "i": 0, "key": kd, "losses": []}

    def one():
        i = box["i"] % 8
        box["key"], sub = jax.random.split(box["key"])
        box["params"], box["state"], loss = step(box["params"], box["state"], xs[i], ys[i], sub)
        box["i"] += 1
        box["losses"].append(float(loss))
        return loss

    report_training_step("mlp_step_ms", one, 5, reps, threads, params, box["losses"])


def run_gpt(reps, threads, a):
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8 * a.layers + 8))
    ln = lambda: {"g": jnp.ones(a.dim), "b": jnp.zeros(a.dim)}
    params = {
        "tok": jax.random.normal(next(keys), (a.vocab, a.dim)),
        "pos": jax.random.normal(next(keys), (a.seq, a.dim)),
        "blocks": [{"ln1": ln(), "qkv": linear(next(keys), a.dim, 3 * a.dim),
                    "proj": linear(next(keys), a.dim, a.dim), "ln2": ln(),
                    "fc1": linear(next(keys), a.dim, 4 * a.dim),
                    "fc2": linear(next(keys), 4 * a.dim, a.dim)} for _ in range(a.layers)],
        "ln": ln(),
        "head": linear(next(keys), a.dim, a.vocab, bias=False),
    }
    opt = optax.adamw(learning_rate=3e-4, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.1)
    state = opt.init(params)

    def forward(params, ids):
        b, s = ids.shape
        x = params["tok"][ids] + params["pos"][:s]
        for blk in params["blocks"]:
            q, k, v = jnp.split(apply_linear(blk["qkv"], layer_norm(blk["ln1"], x)), 3, axis=-1)
            heads = lambda t: t.reshape(b, s, a.heads, a.dim // a.heads).transpose(0, 2, 1, 3)
            att = causal_attention(heads(q), heads(k), heads(v)).transpose(0, 2, 1, 3)
            x = x + apply_linear(blk["proj"], att.reshape(b, s, a.dim))
            h = jax.nn.gelu(apply_linear(blk["fc1"], layer_norm(blk["ln2"], x)), approximate=False)
            x = x + apply_linear(blk["fc2"], h)
        return apply_linear(params["head"], layer_norm(params["ln"], x))

    def loss_fn(params, ids):
        logits = forward(params, ids[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, ids[:, 1:]).mean()

    @jax.jit
    def step(params, state, ids):
        loss, grads = jax.value_and_grad(loss_fn)(params, ids)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    ids = jax.random.randint(next(keys), (a.batch, a.seq + 1), 0, a.vocab)
    box = {"params": params, "state": state, "losses": []}

    def one():
        box["params"], box["state"], loss = step(box["params"], box["state"], ids)
        box["losses"].append(float(loss))
        return loss

    report_training_step("gpt_step_ms", one, 2, reps, threads, params, box["losses"])


def run_sdpa(reps, threads):
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(0), 3)
    q, k, v = (jax.random.normal(key, (4, 4, 1024, 64)) for key in (kq, kk, kv))
    grad = jax.jit(jax.grad(lambda q, k, v: causal_attention(q, k, v).sum(), argnums=(0, 1, 2)))
    report("sdpa_fwd_bwd_ms", timed(lambda: grad(q, k, v), warmup=1, reps=reps), threads)


def run_matmul(reps, threads):
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a, b = jax.random.normal(ka, (1024, 1024)), jax.random.normal(kb, (1024, 1024))
    mm = jax.jit(jnp.matmul)
    report("matmul_ms", timed(lambda: mm(a, b), warmup=2, reps=reps), threads)


def main():
    p = peer_common.arg_parser("The peer steps in JAX jit (XLA:CPU).")
    a = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    if cores != a.threads:
        print(f"jax_steps.py: --threads {a.threads} but the process may run on {cores} cores; XLA "
              f"sizes its pools from the affinity: run it under `taskset -c 0-{a.threads - 1}`",
              file=sys.stderr)
        sys.exit(2)
    cases = a.cases.split(",")
    if "mlp" in cases:
        run_mlp(20 if a.quick else 100, a.threads)
    if "gpt" in cases:
        run_gpt(2 if a.quick else 4, a.threads, a)
    if "sdpa" in cases:
        run_sdpa(2 if a.quick else 5, a.threads)
    if "matmul" in cases:
        run_matmul(5 if a.quick else 20, a.threads)


if __name__ == "__main__":
    main()
