"""Evaluation through Python on 1M rows against the kernel alone (what `rewardlab eval` runs)."""

from __future__ import annotations

import time

import numpy as np

import rewardlab

ROWS = 1 << 20


def test_python_evaluation_costs_what_the_cli_spends_on_the_same_columns(root, capsys):
    """Through Python, 1M rows cost what the CLI pays for them: a table built from the columns and the kernel.

    The baseline is measured in the same loop: the kernel on the table built
    once (`kernel`), and the kernel after building the table from the same
    columns, which is one copy of them (`table + kernel`). Since the kernel
    became native C, that copy is about as large as the kernel itself; the
    binding's own conversions (borrowing NumPy's float64 arrays, handing the
    outputs back without a copy) must add little to it.
    """
    program = rewardlab.load(root / "rewards/codegrep_v3.reward")
    rng = np.random.default_rng(11)
    features = {"Fb(file)": rng.random(ROWS), "c": rng.integers(0, 17, ROWS) / 2.0}
    groups = np.repeat(np.arange(ROWS // 8, dtype=np.int64), 8)
    kernels, with_tables, through_python = [], [], []
    # Interleaved, so that a busy moment slows every side alike.
    for _ in range(11):
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
    assert by_ids.advantage.tolist() == out.advantage.tolist()
    with capsys.disabled():
        print(
            f"\n1M rows, codegrep_v3: kernel {kernel * 1e3:.1f} ms, table + kernel {with_table * 1e3:.1f} ms, "
            f"through Python {best * 1e3:.1f} ms ({best / with_table:.2f}x), "
            f"with an int64 group id per row {with_ids * 1e3:.1f} ms"
        )
    assert best < 1.5 * with_table, (best, with_table, kernel)


def test_evaluation_releases_the_gil(root):
    """Another Python thread keeps running while a large evaluation is in the kernel."""
    import threading

    program = rewardlab.load(root / "rewards/codegrep_v3.reward")
    rows = 4 * ROWS
    rng = np.random.default_rng(5)
    features = {"Fb(file)": rng.random(rows), "c": rng.integers(0, 17, rows) / 2.0}
    span: list[float] = []

    def evaluate():
        span.append(time.perf_counter())
        program.evaluate(features, 8)
        span.append(time.perf_counter())

    worker = threading.Thread(target=evaluate)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    start, end = span
    inside = [t for t in ticks if start <= t <= end]
    gaps = np.diff([start, *inside, end])
    # Holding the GIL through the kernel would leave one gap as long as the evaluation.
    assert end - start > 0.05, "the evaluation is too short to tell"
    assert gaps.max() < 0.5 * (end - start), (gaps.max(), end - start)
