#!/usr/bin/python3
"""Writes every oracle case to one file: generate_cases.py OUT_FILE.

Each module in cases/ defines cases() returning a list of oracle_lib.Case.
Run with Debian's /usr/bin/python3, which sees python3-torch.
"""
import importlib
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import torch  # noqa: E402

torch.manual_seed(0)


def main():
    out_path = pathlib.Path(sys.argv[1])
    lines, names = [], set()
    for path in sorted((pathlib.Path(__file__).parent / "cases").glob("[!_]*.py")):
        module = importlib.import_module(f"cases.{path.stem}")
        for c in module.cases():
            if c.name in names:
                sys.exit(f"duplicate oracle case name {c.name} in {path.name}")
            names.add(c.name)
            lines += c.lines()
    out_path.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(names)} oracle cases to {out_path}")


if __name__ == "__main__":
    main()
