"""Evaluation through Python on 1M rows: grouping forms agree, and the kernel releases the GIL."""

from __future__ import annotations

import time

import numpy as np

import rewardlab

ROWS = 1 << 20


def test_grouping_by_ids_gives_what_grouping_by_size_gives(root):
    """1M rows grouped by an int64 id per row score exactly as the same rows grouped by a size.

    How long each takes beside the kernel alone is a benchmark
    (`benches/python_eval.py`), not a test: a busy machine must not fail CI.
    """
    program = rewardlab.load(root / "rewards/codegrep_v3.reward")
    rng = np.random.default_rng(11)
    features = {"Fb(file)": rng.random(ROWS), "c": rng.integers(0, 17, ROWS) / 2.0}
    groups = np.repeat(np.arange(ROWS // 8, dtype=np.int64), 8)
    by_size = program.evaluate(features, 8)
    by_ids = program.evaluate(features, groups)
    for name in ("reward", "adv", "advantage"):
        assert getattr(by_ids, name).tolist() == getattr(by_size, name).tolist(), name
    # The kernel-only entry point the benchmark uses runs on the same columns.
    assert len(program._core.kernel_seconds(features, 8, repeats=2, with_table=True)) == 2


def test_evaluation_releases_the_gil(root):
    """Another Python thread keeps running while a large evaluation is in the kernel."""
    import threading

    program = rewardlab.load(root / "rewards/codegrep_v3.reward")
    rng = np.random.default_rng(5)

    def watch(rows: int) -> tuple[float, float]:
        """Evaluates `rows` rows in a thread while this one ticks; the evaluation's length and the longest gap."""
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
        return end - start, float(np.diff([start, *inside, end]).max())

    # Long enough to tell (50 ms) on a fast machine too: the rows double until it is.
    rows = 4 * ROWS
    length, gap = watch(rows)
    while length <= 0.05 and rows < 32 * ROWS:
        rows *= 2
        length, gap = watch(rows)
    assert length > 0.05, f"{rows} rows took {length:.3f} s: too short to tell"
    # Holding the GIL through the kernel would leave one gap as long as the evaluation.
    assert gap < 0.5 * length, (gap, length)
