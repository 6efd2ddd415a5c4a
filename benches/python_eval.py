"""Evaluation through the Python package on 1M rows beside what the CLI spends on the same columns.

The baseline is measured in the same loop, interleaved so that a busy moment
slows every side alike: the kernel on a table built once (`kernel`), and the
kernel after building the table from the same columns, which is one copy of
them (`table + kernel`, what `rewardlab eval` pays once it has parsed its
input). The binding's own conversions (borrowing NumPy's float64 arrays,
handing the outputs back without a copy) should add little to the latter;
the target is under 1.5x. Grouping by an int64 id per row is timed once beside it.

Run with the interpreter the package is installed in (scripts/python-test.sh
leaves one behind):

    target/python-test-venv/bin/python benches/python_eval.py [--rows N] [--repeats K]

Exits 1 when the ratio misses the target, so that a script can tell; it is a
benchmark, not a test, and CI does not run it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import rewardlab

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 20, help="rows evaluated (default 2^20)")
    parser.add_argument("--repeats", type=int, default=11, help="interleaved rounds; the best of each side counts")
    parser.add_argument("--formula", default=str(ROOT / "rewards/codegrep_v3.reward"), help="the .reward file")
    args = parser.parse_args()

    program = rewardlab.load(args.formula)
    rng = np.random.default_rng(11)
    rows = args.rows - args.rows % 8
    features = {"Fb(file)": rng.random(rows), "c": rng.integers(0, 17, rows) / 2.0}
    groups = np.repeat(np.arange(rows // 8, dtype=np.int64), 8)
    kernels, with_tables, through_python = [], [], []
    out = None
    for _ in range(args.repeats):
        kernels += program._core.kernel_seconds(features, 8, repeats=1)
        with_tables += program._core.kernel_seconds(features, 8, repeats=1, with_table=True)
        out = None  # the last outputs are freed before the clock starts, as the kernel's are
        start = time.perf_counter()
        out = program.evaluate(features, 8)
        through_python.append(time.perf_counter() - start)
    kernel, with_table, best = min(kernels), min(with_tables), min(through_python)
    start = time.perf_counter()
    by_ids = program.evaluate(features, groups)
    with_ids = time.perf_counter() - start
    if by_ids.advantage.tolist() != out.advantage.tolist():
        print("grouping by ids and by size disagree", file=sys.stderr)
        return 2
    ratio = best / with_table
    print(f"| rows | kernel | table + kernel | through Python | ratio (target < {TARGET}) | int64 group ids |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {rows} | {kernel * 1e3:.1f} ms | {with_table * 1e3:.1f} ms | {best * 1e3:.1f} ms "
        f"| {ratio:.2f}x | {with_ids * 1e3:.1f} ms |"
    )
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
