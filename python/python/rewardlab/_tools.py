"""Shared plumbing of the trainer integrations: sandboxes per store, and one tool call.

Not public API: :mod:`rewardlab.trl` and :mod:`rewardlab.verl` build their
trainer-facing objects on these helpers.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from . import _core

_SANDBOXES: dict[tuple[str, tuple[tuple[str, Any], ...]], _core.Sandbox] = {}
_LOCK = threading.Lock()

#: The tools the sandbox serves, with the arguments each takes (the contract's names).
TOOL_ARGS: dict[str, tuple[str, ...]] = {
    "grep": ("pattern", "path", "case_sensitive"),
    "glob": ("pattern",),
    "read": ("path", "start", "end"),
}


def parse_target(value: Any, what: str) -> dict[str, Any]:
    """A task's targets in the rollout record's shape, from a dict, its JSON text or a list of files.

    ``what`` names the argument in the error (``target``, ``ground_truth``).
    """
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    if isinstance(value, Sequence):
        return {"files": list(value)}
    raise _core.RewardError(f"{what}: expected a dict, JSON text or a list of files, got {type(value).__name__}")


class Served(NamedTuple):
    """One call as it was served: what the policy read, and its rollout record."""

    output: str
    status: str
    record: dict[str, Any]


def default_store() -> str:
    """``$REWARDLAB_STORE``, or a directory under the system's temporary directory."""
    return os.environ.get("REWARDLAB_STORE") or os.path.join(tempfile.gettempdir(), "rewardlab-store")


def shared_sandbox(store: str | None = None, **limits: Any) -> _core.Sandbox:
    """One sandbox per (store, limits) in this process, so every environment
    instance shares its trees, its content index and its result cache."""
    root = os.path.abspath(store or default_store())
    key = (root, tuple(sorted(limits.items())))
    with _LOCK:
        sandbox = _SANDBOXES.get(key)
        if sandbox is None:
            sandbox = _core.Sandbox(root, **limits)
            _SANDBOXES[key] = sandbox
        return sandbox


def call_args(tool: str, given: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call as the contract writes them: unset (``None``) ones left out."""
    return {k: v for k, v in given.items() if v is not None}


def serve(tree: _core.Tree, tool: str, args: dict[str, Any]) -> Served:
    """Runs one call on a tree; a malformed call is answered, never raised."""
    output, status, record = tree.call(json.dumps({"tool": tool, "args": args}))
    return Served(output, status, json.loads(record))
