"""PyTorch peers of mstep's MLP step, GPT-mini step and SDPA (bench/peers.sh).

Runs under Debian's PyTorch 1.13 (/usr/bin/python3) and under PyTorch 2.x
(the peers virtual environment). Each case prints one line

    RESULT metric=<m> impl=<i> value=<median ms per step> threads=<n> [params=<p>] [loss=<a>-><b>]

  mlp   examples/mnist_mlp's model: Linear 784->128, ReLU, Dropout(0.5),
        Linear 128->10, log_softmax, NLL loss, Adadelta lr 0.1, batch 200.
  gpt   examples/models/GptMini: token + position embeddings, pre-norm
        blocks (LayerNorm, causal attention, LayerNorm, MLP 4x, exact GELU),
        final LayerNorm, linear head without bias; cross-entropy over full
        length sequences; AdamW (lr 3e-4, weight decay 0.1); no clipping.
  sdpa  causal attention forward + backward of sum(out) into q, k and v:
        written out (matmul, mask, softmax, matmul), and on PyTorch 2.x also
        F.scaled_dot_product_attention (its fused CPU kernel).
  matmul  a @ b, 1024 x 1024 f32.
Modes: eager, and on PyTorch 2.x also torch.compile (inductor, CPU);
cudagraph (gpt with --device cuda only): the whole step captured into one
CUDA graph (torch.cuda.graph) and replayed, with host_us, the host time of
one replay() call.
Random data, made before timing: the time of a step does not depend on it.

    python3 bench/peers/torch_steps.py --threads N [--cases mlp,gpt,sdpa,matmul]
                                       [--modes eager,compile,cudagraph] [--quick]
                                       [--device cuda] [--autocast bf16]

--device cuda and --autocast bf16 apply to the gpt case (the CUDA GPU
check's peer, scripts/gpu_check.sh): the model and batch on the GPU,
forward and loss under torch.autocast; each step ends with loss.item(),
which waits for the GPU.
"""
import contextlib
import re
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import peer_common


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        a = attention(q, k, v, fused=hasattr(F, "scaled_dot_product_attention"))
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def attention(q, k, v, fused):
    """Causal attention: PyTorch's fused op where it has one (2.x), else
    the eager composition (1.13 has no F.scaled_dot_product_attention)."""
    if fused:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v


timed = peer_common.timed


def report(metric, impl, ms, **extra):
    peer_common.report(metric, impl, ms, torch.get_num_threads(), **extra)


def run_mlp(impl, compile_, reps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10),
                          nn.LogSoftmax(dim=1))
    opt = torch.optim.Adadelta(model.parameters(), lr=0.1)
    forward, opt_step = model, opt.step
    if compile_:
        forward, opt_step = torch.compile(model), torch.compile(opt.step)
    xs = [torch.randn(200, 784) for _ in range(8)]
    ys = [torch.randint(0, 10, (200,)) for _ in range(8)]
    losses, i = [], [0]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.nll_loss(forward(xs[i[0] % 8]), ys[i[0] % 8])
        loss.backward()
        opt_step()
        i[0] += 1
        losses.append(loss.item())

    ms = timed(step, warmup=5, reps=reps)
    params = sum(p.numel() for p in model.parameters())
    report("mlp_step_ms", impl, ms, params=params, loss=f"{losses[0]:.3f}->{losses[-1]:.3f}")


def run_gpt(impl, compile_, reps, a):
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.dim, a.heads, a.layers, a.seq).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    forward, opt_step = model, opt.step
    if compile_:
        forward, opt_step = torch.compile(model), torch.compile(opt.step)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=a.device)
    losses = []
    autocast = (torch.autocast(a.device, dtype=torch.bfloat16) if a.autocast == "bf16"
                else contextlib.nullcontext())

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            logits = forward(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        opt_step()
        losses.append(loss.item())

    ms = timed(step, warmup=2, reps=reps)
    params = sum(p.numel() for p in model.parameters())
    report("gpt_step_ms", impl, ms, params=params, loss=f"{losses[0]:.3f}->{losses[-1]:.3f}")


def run_gpt_cuda_graph(impl, reps, a):
    """The gpt step captured whole into one CUDA graph (PyTorch's
    whole-network capture: warmup on a side stream, AdamW capturable,
    autocast without its weight cache) and replayed: issue 22's peer for
    mstep's replay. Also reports the host time of one replay() call
    (host_us, median; the GPU idle before each)."""
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.dim, a.heads, a.layers, a.seq).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, capturable=True)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=a.device)
    autocast = (torch.autocast(a.device, dtype=torch.bfloat16, cache_enabled=False)
                if a.autocast == "bf16" else contextlib.nullcontext())

    def train_step():
        with autocast:
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = train_step()
    losses = []

    def step():
        graph.replay()
        losses.append(static_loss.item())

    ms = timed(step, warmup=2, reps=reps)
    host = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        host.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    params = sum(p.numel() for p in model.parameters())
    report("gpt_step_ms", impl, ms, params=params, loss=f"{losses[0]:.3f}->{losses[-1]:.3f}",
           host_us=f"{statistics.median(host):.1f}")


def run_sdpa(impl, fused, reps):
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 4, 1024, 64, requires_grad=True) for _ in range(3))

    def step():
        for t in (q, k, v):
            t.grad = None
        attention(q, k, v, fused).sum().backward()

    report("sdpa_fwd_bwd_ms", impl, timed(step, warmup=1, reps=reps))


def run_matmul(impl, reps):
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    report("matmul_ms", impl, timed(lambda: a @ b, warmup=2, reps=reps))


def main():
    p = peer_common.arg_parser("The peer steps in PyTorch (1.13 or 2.x), eager or compiled.")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--device", default="cpu", help="the gpt case's device (cpu, cuda)")
    p.add_argument("--autocast", default="none", choices=["none", "bf16"],
                   help="the gpt case's forward and loss under torch.autocast")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    # "1.13.0a0" (Debian) and "2.15.0+cpu" name the release in their first three fields.
    version = ".".join(re.findall(r"\d+", torch.__version__)[:3])
    cases, modes = a.cases.split(","), a.modes.split(",")
    if not hasattr(torch, "compile"):
        modes = [m for m in modes if m != "compile"]
    for mode in modes:
        impl = f"torch-{version}-{mode}"
        if a.device != "cpu" or a.autocast != "none":
            impl += f"-{a.device}-{a.autocast}"
        compile_ = mode == "compile"
        if mode == "cudagraph":  # the gpt step on a GPU only
            if "gpt" in cases and a.device == "cuda":
                run_gpt_cuda_graph(impl, 30, a)
            continue
        if "mlp" in cases:
            run_mlp(impl, compile_, reps=20 if a.quick else 100)
        if "gpt" in cases:
            run_gpt(impl, compile_, 2 if a.quick else (4 if a.device == "cpu" else 30), a)
    if "sdpa" in cases:
        reps = 2 if a.quick else 5
        run_sdpa(f"torch-{version}-written-out", False, reps)
        if hasattr(F, "scaled_dot_product_attention"):
            run_sdpa(f"torch-{version}-fused", True, reps)
    if "matmul" in cases:
        run_matmul(f"torch-{version}", 5 if a.quick else 20)


if __name__ == "__main__":
    main()
