"""Evaluation through Python on 1M rows against the kernel alone (what `rewardlab eval` runs)."""

from __future__ import annotations

import time

import numpy as np

import rewardlab

ROWS = 1 << 20


def test_python_evaluation_is_within_twice_the_kernel(root, capsys):
    program = rewardlab.load(root / "rewards/codegrep_v3.reward")
    rng = np.random.default_rng(11)
    features = {"Fb(file)": rng.random(ROWS), "c": rng.integers(0, 17, ROWS) / 2.0}
    groups = np.repeat(np.arange(ROWS // 8, dtype=np.int64), 8)
    kernel = min(program._core.kernel_seconds(features, 8, repeats=7))
    through_python = []
    for _ in range(7):
        start = time.perf_counter()
        out = program.evaluate(features, 8)
        through_python.append(time.perf_counter() - start)
    best = min(through_python)
    start = time.perf_counter()
    by_ids = program.evaluate(features, groups)
    with_ids = time.perf_counter() - start
    assert by_ids.advantage.tolist() == out.advantage.tolist()
    with capsys.disabled():
        print(
            f"\n1M rows, codegrep_v3: kernel {kernel * 1e3:.1f} ms, through Python {best * 1e3:.1f} ms "
            f"({best / kernel:.2f}x), with an int64 group id per row {with_ids * 1e3:.1f} ms"
        )
    assert best < 2 * kernel, (best, kernel)


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
