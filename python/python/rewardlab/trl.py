"""rewardlab inside TRL's ``GRPOTrainer``: a checked reward file as a reward
function, and the read-only sandbox as an ``environment_factory``.

>>> from rewardlab.trl import reward_function, SandboxEnvironment
>>> trainer = GRPOTrainer(
...     model=model,
...     reward_funcs=reward_function("rewards/fb_file.reward", targets_column="target"),
...     environment_factory=SandboxEnvironment,
...     train_dataset=dataset,  # columns: prompt, repo, commit, target
...     args=GRPOConfig(num_generations=8),
... )

Both objects are plain Python on purpose: TRL finds an environment's tools
with ``inspect.getmembers(env, inspect.ismethod)`` and reads their type hints
and Google-style docstrings, and it calls reward functions with keyword
arguments and logs them under ``__name__``; none of that sees the methods of a
compiled class.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from . import Program, RewardError, load, parse_answer
from ._tools import TOOL_ARGS, Served, call_args, parse_target, serve, shared_sandbox

__all__ = ["SandboxEnvironment", "reward_function"]

Completion = Union[str, Sequence[Mapping[str, Any]]]


class SandboxEnvironment:
    """One rollout's view of a repository at a commit, served by rewardlab's sandbox.

    TRL creates one instance per rollout and calls ``reset(**row)`` with the
    dataset row; the row's ``repo`` column (a local path, URL, or ``owner/name``
    of a mirror in the store) and ``commit`` column name the tree. ``grep``,
    ``glob`` and ``read`` are the tools; each returns exactly the text a
    rewardlab policy reads, with the sandbox's limits (4096-character outputs,
    time budgets). Every call is kept in ``calls`` so that
    :func:`reward_function` can compute the tool features ``c``, ``C``, ``T``
    and ``e``.

    Configure by subclassing: ``store`` (default ``$REWARDLAB_STORE`` or a
    temporary directory), ``repo_column``, ``commit_column``, ``tree_kind``
    (``view`` or ``worktree``) and ``limits`` (keyword arguments of
    ``rewardlab.Sandbox``).
    """

    store: str | None = None
    repo_column: str = "repo"
    commit_column: str = "commit"
    tree_kind: str = "view"
    limits: Mapping[str, Any] = {}

    def __init__(self) -> None:
        self._sandbox = shared_sandbox(self.store, **dict(self.limits))
        self._tree: Any = None
        #: Every call of the current rollout, in order: ``{"tool", "args", "record", "status"}``.
        self.calls: list[dict[str, Any]] = []
        #: How many times ``reset`` was called on this instance.
        self.resets = 0

    def reset(self, **row: Any) -> str | None:
        """Opens the row's repository at its commit and forgets the previous rollout's calls."""
        for column in (self.repo_column, self.commit_column):
            if row.get(column) is None:
                raise RewardError(
                    f"SandboxEnvironment.reset: the dataset row has no `{column}` column "
                    f"(it has: {', '.join(sorted(row)) or 'none'})"
                )
        self._tree = self._sandbox.tree(str(row[self.repo_column]), str(row[self.commit_column]), self.tree_kind)
        self.calls = []
        self.resets += 1
        return None

    def grep(self, pattern: str, path: str | None = None, case_sensitive: bool | None = None) -> str:
        """Searches the repository's files for a regular expression.

        Args:
            pattern: A regular expression (Rust regex syntax), e.g. `def send\\(`.
            path: Only search files matching this glob, e.g. `*.py` or `src/**/*.py`.
            case_sensitive: Set to false to match regardless of case.

        Returns:
            Matching lines as `path:line:text`, one per line.
        """
        return self._serve("grep", {"pattern": pattern, "path": path, "case_sensitive": case_sensitive})

    def glob(self, pattern: str) -> str:
        """Lists the repository's files whose paths match a shell glob.

        Args:
            pattern: A glob relative to the repository root; `*` stops at `/`, `**` does not.

        Returns:
            Matching file paths, one per line.
        """
        return self._serve("glob", {"pattern": pattern})

    def read(self, path: str, start: int | None = None, end: int | None = None) -> str:
        """Reads numbered lines of one file of the repository.

        Args:
            path: The file, relative to the repository root.
            start: The first line to show, 1-based.
            end: The last line to show, inclusive.

        Returns:
            The file's lines, each prefixed with its number.
        """
        return self._serve("read", {"path": path, "start": start, "end": end})

    def _serve(self, tool: str, given: dict[str, Any]) -> str:
        if self._tree is None:
            raise RewardError(f"SandboxEnvironment.{tool}: called before reset()")
        args = call_args(tool, given)
        served: Served = serve(self._tree, tool, args)
        self.calls.append({"tool": tool, "args": args, "record": served.record, "status": served.status})
        return served.output


def reward_function(
    path: Union[str, "os.PathLike[str]"],
    *,
    answer_from: Union[str, Callable[[Completion], str]] = "completion",
    targets_column: str = "target",
    params: Mapping[str, float] | None = None,
    output: str = "reward",
    num_generations: int | None = None,
    line_match: str = "coverage",
    log_features: bool = True,
    name: str | None = None,
) -> Callable[..., list[float | None]]:
    """A TRL reward function that scores completions with a checked reward file.

    The file is loaded (and checked) once, here. Each call parses every
    completion's ``<answer>{...}</answer>`` with the strict schema (a malformed
    answer is ``valid = 0`` with empty predictions, which the reward file
    handles, never an exception), builds one rollout record per completion,
    computes the features the file reads, evaluates it per group, and logs each
    feature's batch mean through TRL's ``log_metric`` as ``rewardlab/<key>``.

    Args:
        path: The reward file (or its text).
        answer_from: ``"completion"`` (the last assistant message of a
            conversational completion, or the whole text of a standard one), or
            a function from a completion to the text holding the answer.
        targets_column: The dataset column with each row's ground truth: a dict
            (or JSON text) in the rollout record's ``target`` shape
            (``files``, ``line_ranges``, ``functions``), or a list of files. A row
            whose target is ``None`` is unscorable and gets ``None``.
        params: Overrides of the file's ``param`` values.
        output: Which output to return, ``"reward"`` (TRL then applies its own
            group normalisation) or ``"advantage"`` (set TRL's
            ``scale_rewards="none"``; groups must then be whole on each process).
        num_generations: Group rows in consecutive blocks of this size (TRL's
            ``num_generations``); by default consecutive rows with the same
            prompt form a group, which is how TRL lays out a batch.
        line_match: ``coverage`` or ``jaccard`` for the ``lr`` level.
        log_features: Log each feature's batch mean through ``log_metric``.
        name: The function's ``__name__`` (TRL's logged name); default
            ``rewardlab_<file stem>``.

    Returns:
        ``f(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]``.
    """
    program: Program = load(path, params=params)
    if output not in ("reward", "adv", "advantage"):
        raise RewardError(f"output: expected `reward`, `adv` or `advantage`, got `{output}`")
    pick_text = answer_from if callable(answer_from) else _answer_text
    if not callable(answer_from) and answer_from != "completion":
        raise RewardError(f"answer_from: expected `completion` or a function, got `{answer_from}`")

    def reward(
        prompts: Sequence[Any],
        completions: Sequence[Completion],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        targets = kwargs.get(targets_column)
        if targets is None:
            raise RewardError(
                f"reward function: TRL passed no `{targets_column}` column (columns: "
                f"{', '.join(k for k in kwargs if k not in ('trainer_state', 'log_metric', 'log_extra')) or 'none'})"
            )
        environments = kwargs.get("environments")
        groups = _group_ids(prompts, len(completions), num_generations)
        records: list[dict[str, Any]] = []
        rows: list[int] = []
        for i, completion in enumerate(completions):
            target = _target(targets[i])
            if target is None:
                continue
            env = environments[i] if environments is not None else None
            records.append(
                _record(groups[i], completion, target, pick_text, env, completion_ids[i] if completion_ids else None)
            )
            rows.append(i)
        scores: list[float | None] = [None] * len(completions)
        if not records:
            return scores
        columns = program.features(records, line_match=line_match, source="TRL completions")
        values = getattr(program.evaluate(columns, [r["group"] for r in records]), output)
        for row, value in zip(rows, values.tolist()):
            scores[row] = value
        log_metric = kwargs.get("log_metric")
        if log_features and log_metric is not None:
            for key, column in columns.items():
                log_metric(f"rewardlab/{key}", float(column.mean()))
            log_metric("rewardlab/valid_answer", sum(r["valid"] for r in records) / len(records))
        return scores

    reward.__name__ = name or "rewardlab_" + _stem(path)
    reward.__qualname__ = reward.__name__
    reward.program = program  # type: ignore[attr-defined]
    return reward


def _stem(path: Union[str, "os.PathLike[str]"]) -> str:
    text = os.fspath(path)
    if "\n" in text or not text.endswith(".reward") and not os.path.isfile(text):
        return "reward"
    return os.path.splitext(os.path.basename(text))[0]


def _group_ids(prompts: Sequence[Any], n: int, num_generations: int | None) -> list[str]:
    """Group ids per row: blocks of ``num_generations``, or runs of the same prompt."""
    if num_generations is not None:
        return [str(i // num_generations) for i in range(n)]
    ids: list[str] = []
    group = -1
    previous: Any = object()
    for i in range(n):
        prompt = prompts[i] if i < len(prompts) else None
        if prompt != previous:
            group += 1
            previous = prompt
        ids.append(str(group))
    return ids


def _target(value: Any) -> dict[str, Any] | None:
    return None if value is None else parse_target(value, "target")


def _messages(completion: Completion) -> list[Mapping[str, Any]]:
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return list(completion)


def _content_text(message: Mapping[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def _answer_text(completion: Completion) -> str:
    """The last assistant message's text: where a final answer is."""
    for message in reversed(_messages(completion)):
        if message.get("role") == "assistant":
            return _content_text(message)
    return ""


def _turns(completion: Completion, env: Any) -> list[list[dict[str, Any]]]:
    """The rollout's turns, one per assistant message, with each call's record.

    A call the environment served is matched to its record by tool name and
    arguments, in order; a call TRL could not deliver (unknown tool, bad
    arguments) is logged as the contract's ``invalid`` call. Without a
    rewardlab environment, calls are logged without entities, so ``e`` is
    reported unavailable rather than guessed.
    """
    served = list(getattr(env, "calls", [])) if isinstance(env, SandboxEnvironment) else None
    cursor = 0
    turns: list[list[dict[str, Any]]] = []
    for message in _messages(completion):
        if message.get("role") != "assistant":
            continue
        turn: list[dict[str, Any]] = []
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            tool = function.get("name")
            args = function.get("arguments") or {}
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = None
            if served is None:
                turn.append({"tool": str(tool), "args": args})
                continue
            wanted = call_args(str(tool), args) if isinstance(args, Mapping) else None
            if (
                tool in TOOL_ARGS
                and cursor < len(served)
                and served[cursor]["tool"] == tool
                and served[cursor]["args"] == wanted
            ):
                turn.append(served[cursor]["record"])
                cursor += 1
            else:
                turn.append({"tool": "invalid", "entities": []})
        if served is not None:
            # TRL shows an environment no turn boundaries, so it cannot refuse a turn's calls past
            # the sandbox's limit as a rewardlab policy's sandbox does; the record scores them as
            # that refusal would read: a call that showed nothing.
            limit = env._sandbox.max_calls_per_turn
            turn = turn[:limit] + [{**c, "entities": []} for c in turn[limit:]]
        turns.append(turn)
    return turns or [[]]


def _ends_in_tool_use(messages: list[Mapping[str, Any]]) -> bool:
    if not messages:
        return False
    last = messages[-1]
    return last.get("role") != "assistant" or bool(last.get("tool_calls"))


def _record(
    group: str,
    completion: Completion,
    target: dict[str, Any],
    pick_text: Callable[[Completion], str],
    env: Any,
    ids: Sequence[int] | None,
) -> dict[str, Any]:
    predicted, _reason = parse_answer(pick_text(completion))
    messages = _messages(completion)
    used_tools = any(m.get("role") == "tool" for m in messages)
    record: dict[str, Any] = {
        "group": group,
        "target": target,
        "valid": predicted is not None,
        "turns": _turns(completion, env),
        # The tool loop stopped (turn or length budget) before the model wrote a final message.
        "truncated": predicted is None and _ends_in_tool_use(messages),
    }
    if predicted is not None:
        record["predicted"] = predicted
    # TRL's completion ids include tool-response tokens, which `len` must not
    # count; with tool responses present the count is left out (so a file that
    # reads `len` says so) rather than overstated.
    if ids is not None and not used_tools:
        record["completion_tokens"] = len(ids)
    return record
