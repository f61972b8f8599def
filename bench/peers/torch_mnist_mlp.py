"""PyTorch peer of examples/mnist_mlp's accuracy on real data: the same
training, written in PyTorch, on the same gzipped IDX files.

Same model (Linear 784->128, ReLU, Dropout(0.5), Linear 128->10,
log_softmax, NLL loss, PyTorch's default Linear init, which mstep's
nn::Linear copies), optimizer (Adadelta, lr 0.1, rho 0.9, eps 1e-6), batch
(200, the partial last batch dropped, a fresh shuffle each epoch), input
normalization ((x / 255 - 0.1307) / 0.3081) and test pass (eval mode, every
full batch of the test set). The seeds differ, so the figures match to
within run-to-run spread, not digit for digit. Prints one line per epoch
and `test accuracy after N steps: X%`, as mnist_mlp does.

    /usr/bin/python3 bench/peers/torch_mnist_mlp.py [--data DIR] [--epochs 3]
                     [--threads N] [--seed S]

DIR defaults to Debian's Fashion-MNIST (dataset-fashion-mnist).
"""
import argparse
import gzip
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 200


def read_idx(path, magic, header_words):
    """The uint8 payload of an IDX file (gzipped or not) and its header sizes."""
    path = pathlib.Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data, ">u4", count=1 + header_words)
    if header[0] != magic:
        sys.exit(f"{path} is not an IDX file with magic {magic} (got {header[0]})")
    return np.frombuffer(data, np.uint8, offset=4 * (1 + header_words)), header[1:]


def find(directory, name):
    for candidate in (directory / name, directory / (name + ".gz")):
        if candidate.exists():
            return candidate
    sys.exit(f"{directory} holds neither {name} nor {name}.gz")


def load(directory, split):
    pixels, dims = read_idx(find(directory, f"{split}-images-idx3-ubyte"), 2051, 3)
    labels, _ = read_idx(find(directory, f"{split}-labels-idx1-ubyte"), 2049, 1)
    x = torch.from_numpy(pixels.reshape(int(dims[0]), 784).astype(np.float32))
    x = (x / 255 - 0.1307) / 0.3081
    return x, torch.from_numpy(labels.astype(np.int64))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.dropout = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.dropout(F.relu(self.fc1(x)))), dim=1)


def accuracy(model, x, y):
    model.eval()
    correct = seen = 0
    with torch.no_grad():
        for first in range(0, len(x) - BATCH + 1, BATCH):
            pred = model(x[first:first + BATCH]).argmax(1)
            correct += (pred == y[first:first + BATCH]).sum().item()
            seen += BATCH
    model.train()
    return correct / seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    directory = pathlib.Path(args.data)
    train_x, train_y = load(directory, "train")
    test_x, test_y = load(directory, "t10k")
    print(f"torch_mnist_mlp: data from {directory}: {len(train_x)} train and {len(test_x)} test "
          f"images; PyTorch {torch.__version__}, {torch.get_num_threads()} threads")

    model = Mlp()
    opt = torch.optim.Adadelta(model.parameters(), lr=0.1)
    print(f"test accuracy before training: {100 * accuracy(model, test_x, test_y):.1f}%")
    step, t0 = 0, time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(train_x))
        for first in range(0, len(train_x) - BATCH + 1, BATCH):
            rows = order[first:first + BATCH]
            opt.zero_grad()
            loss = F.nll_loss(model(train_x[rows]), train_y[rows])
            loss.backward()
            opt.step()
            step += 1
        print(f"epoch {epoch + 1} step {step} loss {loss.item():.6f} "
              f"({step / (time.perf_counter() - t0):.1f} steps/s)")
    print(f"test accuracy after {step} steps: {100 * accuracy(model, test_x, test_y):.1f}%")


if __name__ == "__main__":
    main()
