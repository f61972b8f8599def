#!/usr/bin/python3
"""Writes safetensors files with PyPI's safetensors package
(safetensors.torch.save_file), the writer PyTorch users have, so that
test/unit/checkpoint_test.cpp can check mstep reads them. mstep's writer
plays no part.

    pypi_write_safetensors.py OUT_DIR

writes, from the fixtures of write_safetensors.py:
  dtypes.safetensors   fixture_tensors(), metadata format=pt, source=safetensors
  unicode.safetensors  fixture_unicode() (non-ASCII names and metadata, which
                       PyPI's writer stores as raw UTF-8, not as escapes)

Exit status 0 on success, 3 when the safetensors package is missing. Run it
with the virtual environment scripts/setup.sh makes.
"""
import pathlib
import sys

from write_safetensors import fixture_tensors, fixture_unicode

try:
    from safetensors.torch import save_file
except ImportError as e:
    print(f"{sys.executable} cannot import safetensors ({e}); run scripts/setup.sh, which "
          "creates a virtual environment with PyTorch and PyPI's safetensors")
    sys.exit(3)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: pypi_write_safetensors.py OUT_DIR")
    out_dir = pathlib.Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(fixture_tensors(), out_dir / "dtypes.safetensors",
              metadata={"format": "pt", "source": "safetensors"})
    tensors, metadata = fixture_unicode()
    save_file(tensors, out_dir / "unicode.safetensors", metadata=metadata)


if __name__ == "__main__":
    main()
