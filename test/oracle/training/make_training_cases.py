#!/usr/bin/python3
"""PyTorch side of the oracle training tests: make_training_cases.py OUT_DIR.

For each model it writes, as safetensors:
  <model>_init.safetensors      initial weights (PyTorch state_dict names)
  <model>_batches.safetensors   the batches, step_<k>_x / step_<k>_y (+ lengths)
  <model>_expected.safetensors  per-step losses and the final weights
mstep loads the same weights, trains on the same batches with the same
optimizer, and must match the losses and final weights within 1e-4.
Dropout is off in both. Run with Debian's /usr/bin/python3 (python3-torch).
"""
import math
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
from write_safetensors import write_safetensors  # noqa: E402

torch.manual_seed(0)
torch.set_default_dtype(torch.float32)


# ---- MLP (the Gaudi HPU-Graphs example model) --------------------------------
class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.dropout = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.dropout(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def mlp_case(out_dir, steps=10, batch=64):
    model = Mlp()
    model.eval()  # dropout off
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.Adadelta(model.parameters(), lr=0.1)
    batches, losses = {}, []
    for k in range(steps):
        x = torch.randn(batch, 784)
        y = torch.randint(0, 10, (batch,))
        batches[f"step_{k}_x"], batches[f"step_{k}_y"] = x, y
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    expected = {"losses": torch.tensor(losses)}
    expected.update({f"final.{k}": v for k, v in model.state_dict().items()})
    write_safetensors(out_dir / "mlp_init.safetensors", init)
    write_safetensors(out_dir / "mlp_batches.safetensors", batches)
    write_safetensors(out_dir / "mlp_expected.safetensors", expected)


# ---- GPT-mini: decoder-only, pre-norm, causal, right-padded ------------------
VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 96, 64, 4, 2, 32, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def attention(self, x, lengths):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(DIM, dim=2)
        shape = (b, s, HEADS, DIM // HEADS)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS)
        pos = torch.arange(s)
        causal = pos[None, :] <= pos[:, None]                       # [s, s]
        valid_key = pos[None, :] < lengths[:, None]                  # [b, s]
        allowed = causal[None, None] & valid_key[:, None, None, :]   # [b, 1, s, s]
        probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = probs @ v
        # Padded query rows give zeros (mstep's valid_seq_len semantics);
        # their targets are ignored, so the loss is unaffected either way.
        valid_query = (pos[None, :] < lengths[:, None])[:, None, :, None]
        out = out * valid_query
        return self.proj(out.transpose(1, 2).reshape(b, s, DIM))

    def forward(self, x, lengths):
        x = x + self.attention(self.ln1(x), lengths)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GptMini(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, DIM)
        self.pos_emb = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens, lengths):
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1]))[None]
        for block in self.blocks:
            x = block(x, lengths)
        return self.head(self.ln_f(x))


def gpt_case(out_dir, steps=8):
    model = GptMini()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    batches, losses = {}, []
    for k in range(steps):
        lengths = torch.randint(SEQ // 2, SEQ + 1, (BATCH,))
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
        pos = torch.arange(SEQ)
        tokens = tokens.masked_fill(pos[None, :] >= lengths[:, None], 0)   # right padding
        targets = torch.roll(tokens, -1, dims=1)
        targets = targets.masked_fill(pos[None, :] >= (lengths[:, None] - 1), -100)
        batches[f"step_{k}_x"], batches[f"step_{k}_y"] = tokens, targets
        batches[f"step_{k}_len"] = lengths
        opt.zero_grad()
        logits = model(tokens, lengths)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    expected = {"losses": torch.tensor(losses)}
    expected.update({f"final.{k}": v for k, v in model.state_dict().items()})
    write_safetensors(out_dir / "gpt_init.safetensors", init)
    write_safetensors(out_dir / "gpt_batches.safetensors", batches)
    write_safetensors(out_dir / "gpt_expected.safetensors", expected)


def main():
    out_dir = pathlib.Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    mlp_case(out_dir)
    gpt_case(out_dir)
    print(f"wrote training oracle cases to {out_dir}")


if __name__ == "__main__":
    main()
