"""rewardlab inside verl: a reward file as ``compute_score`` and the sandbox as verl tools.

Reward (``custom_reward_function``)::

    custom_reward_function:
      path: pkg://rewardlab.verl
      name: compute_score
      reward_kwargs:
        reward_file: /abs/path/rewards/fb_file.reward

``compute_score`` takes verl's single form ``(data_source, solution_str,
ground_truth, extra_info)`` and its batch form (``data_sources=``,
``solution_strs=``, ``ground_truths=``, ``extra_infos=``). The ground truth is
the rollout record's ``target`` (a dict or JSON text with ``files``,
``line_ranges``, ``functions``, or a list of files). It returns
``{"score": reward, ...}`` with each feature the file reads alongside, which
verl logs.

Tools (``actor_rollout_ref.rollout.multi_turn.tool_config_path``): the shipped
``examples/verl/tool_config.yaml`` lists :class:`SandboxTool` three times (grep,
glob, read) with their OpenAI schemas (:func:`tool_schemas`). The dataset's
``tools_kwargs`` give each tool ``create_kwargs: {repo: ..., commit: ...}``.
verl calls ``create``, ``execute`` and ``release`` around every single call, so
what a trajectory did is kept under its request id (``agent_data.request_id``),
turn by turn; :func:`trajectory_turns` returns it, and ``compute_score`` reads
it when ``extra_info`` carries ``request_id`` or the turns themselves as
``rewardlab_turns``. Set
``actor_rollout_ref.rollout.multi_turn.max_tool_response_length=4200``: verl's
default (256 characters) would cut grep output that rewardlab's sandbox already
bounds at 4096.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional
from uuid import uuid4

from . import Program, RewardError, load, parse_answer
from ._tools import TOOL_ARGS, parse_target, serve, shared_sandbox

__all__ = ["SandboxTool", "compute_score", "tool_schemas", "trajectory_turns"]

try:  # pragma: no cover - exercised only where verl is installed
    from verl.tools.base_tool import BaseTool as _BaseTool
    from verl.tools.schemas import ToolResponse
except ImportError:  # verl is optional: the same interface, for tests and for users without it.

    class _BaseTool:  # type: ignore[no-redef]
        """The interface of ``verl.tools.base_tool.BaseTool``, used when verl is absent."""

        def __init__(self, config: dict, tool_schema: Any) -> None:
            self.config = config
            self.tool_schema = tool_schema
            self.name = _schema_name(tool_schema)

    class ToolResponse:  # type: ignore[no-redef]
        """The text part of ``verl.tools.schemas.ToolResponse``."""

        def __init__(self, text: str | None = None, **_: Any) -> None:
            self.text = text


_PROGRAMS: dict[tuple[str, tuple[tuple[str, float], ...]], Program] = {}
_PROGRAMS_LOCK = threading.Lock()

# Turns per trajectory (request id), bounded so that a long run that never
# asks for them does not grow without limit.
_TRAJECTORIES: OrderedDict[str, dict[int, list[dict[str, Any]]]] = OrderedDict()
_TRAJECTORIES_LOCK = threading.Lock()
_MAX_TRAJECTORIES = 100_000


def _program(reward_file: str | None, params: Mapping[str, float] | None) -> Program:
    path = reward_file or os.environ.get("REWARDLAB_REWARD_FILE")
    if not path:
        raise RewardError(
            "rewardlab.verl.compute_score: no reward file; set custom_reward_function.reward_kwargs.reward_file "
            "(or $REWARDLAB_REWARD_FILE)"
        )
    key = (os.fspath(path), tuple(sorted((params or {}).items())))
    with _PROGRAMS_LOCK:
        program = _PROGRAMS.get(key)
        if program is None:
            program = load(path, params=params)
            _PROGRAMS[key] = program
        return program


def compute_score(
    data_source: Any = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    data_sources: Sequence[Any] | None = None,
    solution_strs: Sequence[str] | None = None,
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    reward_file: str | None = None,
    params: Mapping[str, float] | None = None,
    line_match: str = "coverage",
    **_: Any,
) -> Any:
    """Scores verl rollouts with a checked reward file.

    Args:
        data_source: Single form: the rollout's data source (unused).
        solution_str: Single form: the decoded response, holding ``<answer>{...}</answer>``.
        ground_truth: Single form: the rollout's target.
        extra_info: Single form: the row's extra info; ``request_id`` or
            ``rewardlab_turns`` supply the tool calls, ``uid`` or ``group`` the group.
        data_sources: Batch form: one data source per rollout.
        solution_strs: Batch form: one response per rollout.
        ground_truths: Batch form: one target per rollout.
        extra_infos: Batch form: one extra info per rollout.
        reward_file: The reward file (from ``reward_kwargs``).
        params: Overrides of the file's ``param`` values.
        line_match: ``coverage`` or ``jaccard`` for the ``lr`` level.

    Returns:
        Single form: ``{"score": reward, "valid_answer": 0 or 1, <feature>: value, ...}``.
        Batch form: a list of those dicts.
    """
    program = _program(reward_file, params)
    batch = solution_strs is not None
    if batch:
        n = len(solution_strs)
        truths = list(ground_truths) if ground_truths is not None else [None] * n
        infos = list(extra_infos) if extra_infos is not None else [None] * n
        texts = list(solution_strs)
    else:
        truths, infos, texts = [ground_truth], [extra_info], [solution_str or ""]
    records = [_record(i, texts[i], truths[i], infos[i]) for i in range(len(texts))]
    if not records:
        return []
    columns = program.features(records, line_match=line_match, source="verl rollouts")
    groups = [r["group"] for r in records]
    # verl computes its own advantages; only `reward` is returned, so the
    # advantage layer may be NaN on the one-rollout groups of the single form.
    outputs = program.evaluate(columns, groups, allow_non_finite=True)
    if not all(map(_finite, outputs.reward.tolist())):
        # Evaluate strictly to raise with the CLI's explanation of the first bad value.
        program.evaluate(columns, groups)
    results = []
    for row, record in enumerate(records):
        result: dict[str, Any] = {"score": float(outputs.reward[row]), "valid_answer": float(record["valid"])}
        for key, column in columns.items():
            result[key] = float(column[row])
        results.append(result)
    return results if batch else results[0]


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def _record(i: int, text: str, truth: Any, info: Mapping[str, Any] | None) -> dict[str, Any]:
    info = info or {}
    predicted, _reason = parse_answer(text)
    record: dict[str, Any] = {
        "group": str(info.get("group", info.get("uid", i))),
        "target": parse_target(truth, "ground_truth"),
        "valid": predicted is not None,
    }
    if predicted is not None:
        record["predicted"] = predicted
    turns = info.get("rewardlab_turns")
    if turns is None and info.get("request_id") is not None:
        turns = trajectory_turns(str(info["request_id"]), pop=True)
    if turns is not None:
        record["turns"] = turns
    return record


def trajectory_turns(request_id: str, *, pop: bool = False) -> list[list[dict[str, Any]]] | None:
    """The tool calls a trajectory made through :class:`SandboxTool`, as rollout-record turns.

    Turns are verl's assistant turns; a final answer turn (``[]``) closes the
    list. ``None`` when the trajectory made no call through these tools.
    """
    with _TRAJECTORIES_LOCK:
        turns = _TRAJECTORIES.pop(request_id, None) if pop else _TRAJECTORIES.get(request_id)
    if turns is None:
        return None
    return [list(turns[t]) for t in sorted(turns)] + [[]]


def _reserve(request_id: str, turn: int) -> tuple[list[Any], int]:
    """A slot for a call in its trajectory's turn, taken in call order.

    verl runs a turn's calls concurrently; each takes its slot before its
    first await, so the records keep the order the model wrote the calls in
    (which `e` depends on), whatever order they finish in.
    """
    with _TRAJECTORIES_LOCK:
        turns = _TRAJECTORIES.setdefault(request_id, {})
        _TRAJECTORIES.move_to_end(request_id)
        calls = turns.setdefault(turn, [])
        calls.append(None)
        while len(_TRAJECTORIES) > _MAX_TRAJECTORIES:
            _TRAJECTORIES.popitem(last=False)
        return calls, len(calls) - 1


def _schema_name(schema: Any) -> str:
    function = schema.get("function") if isinstance(schema, Mapping) else getattr(schema, "function", None)
    name = function.get("name") if isinstance(function, Mapping) else getattr(function, "name", None)
    if not name:
        raise RewardError("SandboxTool: the tool schema names no function")
    return str(name)


class SandboxTool(_BaseTool):
    """One of rewardlab's read-only tools (``grep``, ``glob`` or ``read``) as a verl tool.

    ``config`` keys: ``tool`` (default: the schema's function name), ``store``
    (the mirrors' directory; default ``$REWARDLAB_STORE``), ``tree_kind``
    (``view`` or ``worktree``) and ``limits`` (keyword arguments of
    ``rewardlab.Sandbox``). Each trajectory's ``tools_kwargs`` must give
    ``create_kwargs: {repo: ..., commit: ...}``.
    """

    def __init__(self, config: dict, tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        config = config or {}
        self.tool = str(config.get("tool") or _schema_name(self.tool_schema))
        if self.tool not in TOOL_ARGS:
            raise RewardError(f"SandboxTool: unknown tool `{self.tool}` (expected grep, glob or read)")
        self._sandbox = shared_sandbox(config.get("store"), **dict(config.get("limits") or {}))
        self._tree_kind = str(config.get("tree_kind", "view"))
        self._instances: dict[str, tuple[str, str]] = {}

    def get_openai_tool_schema(self) -> Any:
        """The tool's OpenAI function schema."""
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, Any]:
        """Binds an instance to the repository and commit of its trajectory."""
        create_kwargs = kwargs.get("create_kwargs", kwargs) or {}
        repo, commit = create_kwargs.get("repo"), create_kwargs.get("commit", "HEAD")
        if repo is None:
            raise RewardError(f"SandboxTool `{self.tool}`: create_kwargs has no `repo` (tools_kwargs of the row)")
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = (str(repo), str(commit))
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        """Runs the call and records it under the trajectory's request id and turn."""
        if instance_id not in self._instances:
            raise RewardError(f"SandboxTool `{self.tool}`: unknown instance {instance_id} (create was not called)")
        repo, commit = self._instances[instance_id]
        if isinstance(parameters, str):
            parameters = json.loads(parameters)
        args = {k: v for k, v in (parameters or {}).items() if v is not None}
        agent_data = kwargs.get("agent_data")
        request_id = getattr(agent_data, "request_id", None) or instance_id
        turn = int(getattr(agent_data, "assistant_turns", 0) or 0)
        calls, slot = _reserve(str(request_id), turn)
        calls[slot] = {"tool": "invalid", "entities": []}  # until served: a call that never ran is logged invalid
        served = await asyncio.to_thread(self._serve, repo, commit, args)
        calls[slot] = served.record
        return ToolResponse(text=served.output), 0.0, {"status": served.status}

    def _serve(self, repo: str, commit: str, args: dict[str, Any]) -> Any:
        tree = self._sandbox.tree(repo, commit, self._tree_kind)
        return serve(tree, self.tool, args)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """No step reward: the reward file scores the whole trajectory."""
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forgets the instance; the trajectory's records stay until scored."""
        self._instances.pop(instance_id, None)


def tool_schemas() -> list[dict[str, Any]]:
    """The OpenAI function schemas of grep, glob and read, as the shipped tool_config.yaml lists them."""

    def schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": required},
            },
        }

    return [
        schema(
            "grep",
            "Search the repository's files for a regular expression (Rust regex syntax). "
            "Returns matching lines as path:line:text.",
            {
                "pattern": {"type": "string", "description": "The regular expression."},
                "path": {"type": "string", "description": "Only files matching this glob, e.g. *.py."},
                "case_sensitive": {"type": "boolean", "description": "false to match regardless of case."},
            },
            ["pattern"],
        ),
        schema(
            "glob",
            "List the repository's file paths matching a shell glob (* stops at /, ** does not).",
            {"pattern": {"type": "string", "description": "The glob, relative to the repository root."}},
            ["pattern"],
        ),
        schema(
            "read",
            "Read numbered lines of one file of the repository.",
            {
                "path": {"type": "string", "description": "The file, relative to the repository root."},
                "start": {"type": "integer", "description": "First line, 1-based."},
                "end": {"type": "integer", "description": "Last line, inclusive."},
            },
            ["path"],
        ),
    ]
