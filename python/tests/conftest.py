"""Fixtures of the Python package's tests: the CLI to compare against, and git repositories built here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli() -> Path:
    """The `rewardlab` binary CI already built (debug or release), or a fresh debug build."""
    given = os.environ.get("REWARDLAB_CLI")
    if given:
        return Path(given)
    for profile in ("debug", "release"):
        path = ROOT / "target" / profile / "rewardlab"
        if path.is_file():
            return path
    subprocess.run(["cargo", "build", "--locked", "--bin", "rewardlab"], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / "rewardlab"


@pytest.fixture(scope="session")
def cli():
    """Runs the rewardlab CLI from the repository root; returns the completed process."""
    binary = _cli()

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), *args], cwd=ROOT, capture_output=True, text=True, input=stdin, check=False
        )

    return run


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="session")
def repo(tmp_path_factory) -> dict[str, str]:
    """A small Python project with two commits: `first` (before the fix) and `second`."""
    path = tmp_path_factory.mktemp("repos") / "acme__shop"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "shop").mkdir()
    (path / "shop" / "__init__.py").write_text("")
    (path / "shop" / "cart.py").write_text(
        "class Cart:\n"
        "    def __init__(self):\n"
        "        self.items = []\n"
        "\n"
        "    def total(self):\n"
        "        return sum(item.price for item in self.items)\n"
    )
    (path / "shop" / "pricing.py").write_text("def discount(total):\n    return total * 0.9\n")
    (path / "README.md").write_text("# shop\nA cart and its total.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    first = git(path, "rev-parse", "HEAD")
    (path / "shop" / "pricing.py").write_text(
        "def discount(total):\n    if total > 100:\n        return total * 0.9\n    return total\n"
    )
    git(path, "commit", "-q", "-am", "second")
    second = git(path, "rev-parse", "HEAD")
    return {"path": str(path), "first": first, "second": second}


@pytest.fixture()
def store(tmp_path) -> str:
    return str(tmp_path / "store")
