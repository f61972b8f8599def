"""PyTorch eager peer of the GPT-mini training step (bench/cpu_peers.sh).

The same model as examples/models/GptMini: token + position embeddings,
pre-norm blocks (LayerNorm, causal multi-head attention written out, as
torch 1.13 has no fused SDPA, LayerNorm, MLP 4x with GELU), final
LayerNorm and a linear head without bias; AdamW; cross-entropy. Prints
`torch_gpt_step_ms <median ms>`.

    /usr/bin/python3 bench/peers/torch_gpt_step.py [--steps N] [--dim 256] ...
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        # torch 1.13 (Debian) has no F.scaled_dot_product_attention: the
        # eager composition it would run.
        scores = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)
        a = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v
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
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1024)
    a = p.parse_args()
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.dim, a.heads, a.layers, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    times = []
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step > 0:  # the first step allocates
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"torch_gpt_step_ms {statistics.median(times):.1f}  (torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
