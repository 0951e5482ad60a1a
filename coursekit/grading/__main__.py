"""python -m coursekit.grading data [--check] [NAME ...]: write or check the checks' data."""

from __future__ import annotations

import argparse
import sys

from . import check_data, write_data
from .data import data_names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.grading")
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="write course_lib/exercises/data/<check>.pt from the references")
    data.add_argument("names", nargs="*", help="checks (default: every Check and Answer)")
    data.add_argument("--check", action="store_true", help="only compare with a fresh run")
    args = parser.parse_args(argv)
    names = args.names or data_names()
    if args.check:
        problems = [p for name in names for p in check_data(name)]
        print("\n".join(problems) if problems else f"the data of {len(names)} checks is current")
        return 1 if problems else 0
    for name in write_data(names):
        print(f"wrote the data of {name}")
    return 0


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    sys.exit(main())
