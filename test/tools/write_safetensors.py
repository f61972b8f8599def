#!/usr/bin/python3
"""Writes PyTorch tensors in the safetensors format, by hand: Debian's
python3-torch (1.13) comes without the safetensors package.

    write_safetensors(path, {name: tensor}, metadata=None)

lays the file out as safetensors.torch.save_file does: an 8-byte
little-endian header length, the JSON header padded with spaces to a
multiple of 8, then the tensors' bytes ordered by alignment (widest dtype
first), then name.

Run as a script, `write_safetensors.py fixture OUT_DIR` writes the files
test/unit/checkpoint_test.cpp loads:
  dtypes.safetensors  one tensor per dtype, values from arange
  linear.safetensors  a torch.nn.Linear(3, 2) state_dict
  unicode.safetensors names and metadata that need JSON escapes
                      (json.dumps writes non-ASCII as \\uXXXX)
"""
import json
import pathlib
import struct
import sys

import torch

CODES = {
    torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16",
    torch.float16: "F16", torch.int32: "I32", torch.int64: "I64",
    torch.bool: "BOOL",
}


def _bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)  # numpy has no bfloat16; the bits are what matter
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    blobs, offset = [], 0
    for name in order:
        t = tensors[name]
        data = _bytes(t)
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def fixture_tensors():
    """One tensor per dtype, values from arange. test/unit/checkpoint_test.cpp
    builds the same tensors in mstep, and test/tools/check_safetensors.py
    compares mstep's file against these."""
    base = torch.arange(6, dtype=torch.float64).reshape(2, 3) * 0.5 - 1  # -1 .. 1.5
    return {
        "f32": base.float(),
        "f64": base / 3,
        "bf16": base.bfloat16(),
        "f16": base.half(),
        "i32": torch.arange(-2, 2, dtype=torch.int32),
        "i64": torch.tensor([[1 << 40], [-7]], dtype=torch.int64),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
    }


def fixture_linear():
    """A torch.nn.Linear(3, 2) with weight arange(6) / 4 and bias [-1, 2]."""
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4)
        lin.bias.copy_(torch.tensor([-1.0, 2.0]))
    return lin


def fixture_unicode():
    """Names and metadata that need escapes in a JSON header: non-ASCII
    (json.dumps writes \\uXXXX, a surrogate pair above U+FFFF; PyPI's
    safetensors writes the UTF-8 bytes), a quote, a backslash, a tab and a
    newline. Returns (tensors, metadata); test/unit/checkpoint_test.cpp
    builds the same in mstep."""
    tensors = {
        "caf\u00e9.weight": torch.tensor([1.0, 2.0]),
        "emoji \U0001F600": torch.tensor([3], dtype=torch.int64),
        'quote" back\\slash\ttab': torch.tensor([True]),
        "\u540d\u524d/\u043a\u043b\u044e\u0447": torch.zeros(0),
    }
    metadata = {"format": "pt", "note": "h\u00e9llo \U0001F600",
                "\u043a\u043b\u044e\u0447": 'line\n"quoted"'}
    return tensors, metadata


def fixture(out_dir):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_safetensors(out_dir / "dtypes.safetensors", fixture_tensors(),
                      {"format": "pt", "source": "torch"})
    write_safetensors(out_dir / "linear.safetensors", fixture_linear().state_dict(),
                      {"format": "pt"})
    tensors, metadata = fixture_unicode()
    write_safetensors(out_dir / "unicode.safetensors", tensors, metadata)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "fixture":
        sys.exit("usage: write_safetensors.py fixture OUT_DIR")
    fixture(sys.argv[2])
