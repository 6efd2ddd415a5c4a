"""rewardlab in Python: checked reward files and the read-only code sandbox.

The compiled core (``rewardlab._core``) is the same Rust code the ``rewardlab``
command line runs: a reward file that ``rewardlab check`` rejects raises
:class:`RewardError` here with the same rendered diagnostics, and
:meth:`Program.evaluate` returns bit-for-bit what ``rewardlab eval`` writes.

>>> import rewardlab
>>> program = rewardlab.load("reward = Fb(file)")
>>> out = program.evaluate({"Fb(file)": [1.0, 0.0]}, groups=["a", "a"])
>>> out.reward.tolist()
[1.0, 0.0]

Trainer integrations live in :mod:`rewardlab.trl` and :mod:`rewardlab.verl`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Union

import numpy as np

from . import _core
from ._core import RewardError, Sandbox, Tree

__all__ = [
    "Outputs",
    "Program",
    "RewardError",
    "Sandbox",
    "Tree",
    "features",
    "load",
    "parse_answer",
]

PathOrText = Union[str, "os.PathLike[str]"]


class Outputs(NamedTuple):
    """What evaluation returns: one float64 array per output, rows in input order."""

    reward: np.ndarray
    adv: np.ndarray
    advantage: np.ndarray


class Program:
    """A reward file that parsed and checked without errors.

    Build one with :func:`load`. It is immutable and safe to share between
    threads; evaluation releases the GIL.
    """

    __slots__ = ("_core",)

    def __init__(self, core: _core.Program) -> None:
        self._core = core

    @property
    def name(self) -> str:
        """The name diagnostics use: the path as given, or ``<string>``."""
        return self._core.name

    @property
    def text(self) -> str:
        """The reward file's text."""
        return self._core.text

    @property
    def warnings(self) -> list[str]:
        """Each warning rendered with its location and carets, as the CLI renders it."""
        return self._core.warnings

    @property
    def warnings_text(self) -> str:
        """Every warning and the closing count line, exactly as ``rewardlab check`` prints them."""
        return self._core.warnings_text

    @property
    def feature_keys(self) -> list[str]:
        """The canonical keys of the features the program reads, e.g. ``["Fb(file)", "c"]``."""
        return self._core.feature_keys

    @property
    def params(self) -> dict[str, float]:
        """The ``param`` values in force, in declaration order."""
        return dict(self._core.params)

    def evaluate(
        self,
        features: Mapping[str, Any],
        groups: Union[Sequence[Any], np.ndarray, int],
        *,
        group_size: int | None = None,
        allow_non_finite: bool = False,
    ) -> Outputs:
        """Evaluates ``reward``, ``adv`` and ``advantage`` for every row.

        Args:
            features: Feature key to a 1-D array (or list) of values, one per row.
                Contiguous float64 arrays are read in place; other dtypes are
                converted once. Keys the program does not read are ignored.
            groups: One group id per row (str or int; rows of a group need not be
                adjacent), or an int G for consecutive groups of G rows.
            group_size: Require every group to have exactly this many rows.
            allow_non_finite: Let NaN and infinities through instead of raising.

        Returns:
            :class:`Outputs` of float64 arrays in row order.

        Raises:
            RewardError: A missing feature, a short group, or a NaN, with the
                same explanation ``rewardlab eval`` prints.
        """
        reward, adv, advantage = self._core.evaluate(
            features, groups, group_size=group_size, allow_non_finite=allow_non_finite
        )
        return Outputs(reward, adv, advantage)

    def features(
        self,
        rollouts: Iterable[Union[Mapping[str, Any], str]],
        *,
        line_match: str = "coverage",
        source: str = "rollouts",
    ) -> dict[str, np.ndarray]:
        """The features this program reads, computed from rollout records.

        See :func:`features`.
        """
        return features(rollouts, self, line_match=line_match, source=source)

    def score(
        self,
        rollouts: Iterable[Union[Mapping[str, Any], str]],
        *,
        line_match: str = "coverage",
        source: str = "rollouts",
        group_size: int | None = None,
        allow_non_finite: bool = False,
    ) -> Outputs:
        """Features from rollout records, then evaluation grouped by each record's ``group``."""
        records = [_record_text(r) for r in rollouts]
        columns = features(records, self, line_match=line_match, source=source)
        groups = [json.loads(r)["group"] for r in records]
        return self.evaluate(columns, groups, group_size=group_size, allow_non_finite=allow_non_finite)

    def __repr__(self) -> str:
        return repr(self._core)


def load(
    path_or_text: PathOrText,
    params: Mapping[str, float] | None = None,
    *,
    name: str | None = None,
) -> Program:
    """Parses and checks a reward file against rewardlab's feature schema.

    Args:
        path_or_text: A path (``os.PathLike``, or a one-line ``str`` that ends in
            ``.reward`` or names an existing file), or the reward file's text.
        params: Overrides of the file's ``param`` values, applied in order.
        name: The file name diagnostics show for text (default ``<string>``).

    Returns:
        The checked :class:`Program`; its warnings are in ``program.warnings``.

    Raises:
        RewardError: The file has errors. ``str(err)`` is the rendered
            diagnostics exactly as ``rewardlab check`` prints them (with
            ``file:line:col`` and carets); ``err.diagnostics`` lists them one by one.
    """
    if _is_path(path_or_text):
        path = os.fspath(path_or_text)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        shown = name if name is not None else path
    else:
        text = str(path_or_text)
        shown = name if name is not None else "<string>"
    overrides = [(str(k), float(v)) for k, v in (params or {}).items()]
    return Program(_core.load_source(shown, text, overrides))


def features(
    rollouts: Iterable[Union[Mapping[str, Any], str]],
    program: Program,
    *,
    line_match: str = "coverage",
    source: str = "rollouts",
) -> dict[str, np.ndarray]:
    """Computes the features ``program`` reads from rollout records.

    Args:
        rollouts: Records in the contract's JSON shape (dicts, or JSON text):
            ``group``, ``predicted``, ``target``, ``turns``,
            ``completion_tokens``, ``valid``, ``truncated``; absent keys are
            only an error for a feature that needs them.
        program: The program whose features to compute.
        line_match: ``coverage`` (the contract's rule) or ``jaccard``.
        source: Names the data in error messages.

    Returns:
        Feature key to a float64 array, rows in the order of ``rollouts``.

    Raises:
        RewardError: A bad record or a feature a record cannot provide,
            naming the feature, the rollout and the missing key.
    """
    records = [_record_text(r) for r in rollouts]
    return _core.rollout_features(program._core, records, line_match=line_match, source=source)


def parse_answer(text: str) -> tuple[dict[str, list[str]] | None, str | None]:
    """Parses ``<answer>{...}</answer>`` with the strict schema rewardlab policies use.

    Returns:
        ``(answer, None)`` with the answer in a rollout record's ``predicted``
        shape, or ``(None, reason)`` when the text holds no valid answer.
    """
    return _core.parse_answer(text)


def _record_text(record: Union[Mapping[str, Any], str]) -> str:
    if isinstance(record, str):
        return record
    return json.dumps(record)


def _is_path(value: PathOrText) -> bool:
    if isinstance(value, os.PathLike):
        return True
    if not isinstance(value, str) or "\n" in value:
        return False
    return value.endswith(".reward") or os.path.isfile(value)
