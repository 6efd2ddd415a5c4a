"""Type stubs of the compiled core, ``rewardlab._core`` (Rust, PyO3)."""

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np
import numpy.typing as npt

class RewardError(Exception):
    """A reward file that does not check, or a fault while computing features or rewards."""

    diagnostics: list[str]

class Program:
    @property
    def name(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def warnings_text(self) -> str: ...
    @property
    def feature_keys(self) -> list[str]: ...
    @property
    def params(self) -> list[tuple[str, float]]: ...
    def evaluate(
        self,
        features: Mapping[str, Any],
        groups: Sequence[Any] | npt.NDArray[np.int64] | int,
        group_size: int | None = None,
        allow_non_finite: bool = False,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
    def kernel_seconds(
        self,
        features: Mapping[str, Any],
        groups: Sequence[Any] | npt.NDArray[np.int64] | int,
        repeats: int = 5,
        with_table: bool = False,
    ) -> list[float]: ...

class Tree:
    @property
    def commit(self) -> str: ...
    @property
    def repo(self) -> str: ...
    def call(self, call: str) -> tuple[str, str, str]: ...

class Sandbox:
    def __init__(
        self,
        store: str | PathLike[str],
        *,
        max_output_chars: int | None = None,
        grep_timeout_s: float | None = None,
        glob_timeout_s: float | None = None,
        read_timeout_s: float | None = None,
        max_calls_per_turn: int | None = None,
        result_cache_bytes: int | None = None,
        index: bool = True,
    ) -> None: ...
    def tree(self, repo: str, commit: str = "HEAD", kind: str = "view") -> Tree: ...
    @property
    def max_calls_per_turn(self) -> int: ...
    @property
    def max_output_chars(self) -> int: ...
    @property
    def store(self) -> str: ...

def load_source(name: str, text: str, params: Sequence[tuple[str, float]] | None = None) -> Program: ...
def rollout_features(
    program: Program,
    rollouts: Sequence[str],
    line_match: str = "coverage",
    source: str = "rollouts",
) -> dict[str, npt.NDArray[np.float64]]: ...
def parse_answer(text: str) -> tuple[dict[str, list[str]] | None, str | None]: ...
