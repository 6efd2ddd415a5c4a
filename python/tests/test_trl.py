"""rewardlab.trl called and inspected exactly as TRL's GRPOTrainer calls and inspects it.

The calls mirror `GRPOTrainer._calculate_rewards` (keyword arguments: prompts,
completions, completion_ids, every dataset column but the prompt, trainer_state,
log_extra, log_metric, environments) and the inspection mirrors its
environment set-up (`inspect.getmembers(env, inspect.ismethod)`, tools named by
`__name__`, described by type hints and Google-style docstrings).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections import defaultdict

import pytest

import rewardlab
from rewardlab.trl import SandboxEnvironment, reward_function

V2 = "rewards/codegrep_v2.reward"
SCORE = "reward = (Fb(file) + Fb(lr)) / 2\n"


@pytest.fixture()
def score_file(tmp_path):
    path = tmp_path / "score.reward"
    path.write_text(SCORE)
    return path


def answer(files, ranges=()):
    return "<answer>" + json.dumps({"files": list(files), "line_ranges": list(ranges)}) + "</answer>"


def trl_call(func, prompts, completions, completion_ids=None, environments=None, **columns):
    """What `_calculate_rewards` passes, and what it does with `None`."""
    metrics: dict[str, list[float]] = defaultdict(list)
    extra: dict[str, list] = defaultdict(list)
    kwargs = dict(columns)
    kwargs["trainer_state"] = object()
    kwargs["log_extra"] = lambda column, values: extra[column].extend(values)
    kwargs["log_metric"] = lambda name, value: metrics[name].append(value)
    if environments is not None:
        kwargs["environments"] = environments
    assert not inspect.iscoroutinefunction(func), "TRL would run it on its async loop"
    if completion_ids is None:
        completion_ids = [[1] * 5 for _ in completions]
    out = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
    as_floats = [r if r is not None else float("nan") for r in out]
    return out, as_floats, metrics


def test_reward_function_has_trls_shape(root):
    func = reward_function(root / V2)
    assert func.__name__ == "rewardlab_codegrep_v2"
    assert inspect.isfunction(func) and not inspect.iscoroutinefunction(func)
    params = inspect.signature(func).parameters
    assert list(params)[:3] == ["prompts", "completions", "completion_ids"]
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert reward_function(root / V2, name="fb").__name__ == "fb"


def test_scores_agree_with_the_program_on_the_same_records(score_file):
    func = reward_function(score_file, num_generations=2)
    target = {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]}
    completions = [
        answer(["shop/cart.py"], ["shop/cart.py:5-6"]),
        answer(["shop/pricing.py"]),
        "I think it is cart.py",  # no answer block: invalid, never an exception
        answer(["shop/cart.py", "shop/cart.py"]),  # a repeated file: invalid
    ]
    prompts = ["p0", "p0", "p1", "p1"]
    out, _, metrics = trl_call(func, prompts, completions, target=[target] * 4)
    program = rewardlab.load(score_file)
    records = []
    for i, text in enumerate(completions):
        predicted, _ = rewardlab.parse_answer(text)
        record = {"group": str(i // 2), "target": target, "valid": predicted is not None, "turns": [[]],
                  "truncated": False, "completion_tokens": 5}
        if predicted is not None:
            record["predicted"] = predicted
        records.append(record)
    expected = program.score(records).reward.tolist()
    assert out == expected
    assert out[0] > 0 and out[2] == 0.0 and out[3] == 0.0
    assert metrics["rewardlab/valid_answer"] == [0.5]
    for key in program.feature_keys:
        assert len(metrics[f"rewardlab/{key}"]) == 1


def test_none_target_is_unscorable_and_groups_follow_prompts():
    func = reward_function("reward = Fb(file)\n", output="advantage")
    target = {"files": ["a.py"], "line_ranges": []}
    prompts = ["p0"] * 3 + ["p1"] * 3
    completions = [answer(["a.py"]), answer(["b.py"]), answer([]), answer(["a.py"]), "x", answer(["a.py"])]
    targets = [target, target, None, target, target, target]
    out, floats, _ = trl_call(func, prompts, completions, target=targets)
    assert out[2] is None and floats[2] != floats[2]
    # Group p0 has two scorable rollouts (1 and 0): GRPO's advantage is ±(1 / (0.5 + 1e-4)) / 2 around the mean.
    assert out[0] > 0 > out[1]
    assert abs(out[0] + out[1]) < 1e-12
    # Group p1: two correct, one invalid.
    assert out[3] == out[5] > 0 > out[4]
    assert all(r is None for r in trl_call(func, ["p"], [answer(["a.py"])], target=[None])[0])


def test_targets_as_json_text_or_file_lists():
    func = reward_function("reward = Fb(file)\n")
    completions = [answer(["a.py"]), answer(["a.py"])]
    as_json = trl_call(func, ["p", "p"], completions, target=[json.dumps({"files": ["a.py"]})] * 2)[0]
    as_list = trl_call(func, ["p", "p"], completions, target=[["a.py"], ["a.py"]])[0]
    assert as_json == as_list == [1.0, 1.0]


def test_missing_target_column_is_named():
    func = reward_function("reward = Fb(file)\n", targets_column="gold")
    with pytest.raises(rewardlab.RewardError, match="no `gold` column"):
        trl_call(func, ["p"], [answer(["a.py"])], target=[["a.py"]])


def google_args(doc: str) -> dict[str, str]:
    """The `Args:` section of a Google-style docstring, as transformers' schema builder reads it."""
    section = re.search(r"Args:\n(.*?)(?:\n\s*\n|\Z)", doc, re.S)
    assert section, doc
    return dict(re.findall(r"^\s+(\w+): (.+)$", section.group(1), re.M))


def test_environment_tools_are_found_the_way_trl_finds_them(store):
    env = type("Env", (SandboxEnvironment,), {"store": store})()
    members = dict(inspect.getmembers(env, predicate=inspect.ismethod))
    assert "reset" in members and "get_reward" not in members
    tools = {n: m for n, m in members.items() if n not in ("reset", "get_reward") and not n.startswith("_")}
    assert sorted(tools) == ["glob", "grep", "read"]
    for name, method in tools.items():
        assert method.__name__ == name
        assert not inspect.iscoroutinefunction(method)
        hints = typing.get_type_hints(method)
        assert hints.pop("return") is str
        params = [p for p in inspect.signature(method).parameters]
        assert sorted(hints) == sorted(params), name
        doc = inspect.getdoc(method)
        assert doc and doc.splitlines()[0].endswith("."), name
        assert sorted(google_args(doc)) == sorted(params), name
        assert "Returns:" in doc


def test_environment_serves_what_the_cli_serves(cli, repo, store):
    env_class = type("Env", (SandboxEnvironment,), {"store": store})
    env = env_class()
    assert env.reset(repo=repo["path"], commit=repo["first"], prompt="fix it", target=None) is None
    grep = env.grep("def ", path="*.py")
    glob = env.glob("shop/*.py")
    read = env.read("shop/pricing.py", start=1, end=2)
    for args, got in [
        (["grep", "def ", "--path", "*.py"], grep),
        (["glob", "shop/*.py"], glob),
        (["read", "shop/pricing.py", "--start", "1", "--end", "2"], read),
    ]:
        done = cli("sandbox", "--repo", repo["path"], "--commit", repo["first"], *args)
        assert done.returncode == 0, done.stderr
        assert got.rstrip("\n") == done.stdout.rstrip("\n"), args
    assert "shop/cart.py:2:" in grep
    assert [c["tool"] for c in env.calls] == ["grep", "glob", "read"]
    assert env.calls[0]["args"] == {"pattern": "def ", "path": "*.py"}
    assert "shop/cart.py:2" in env.calls[0]["record"]["entities"]
    # A second commit: reset forgets the first rollout's calls and shows the new tree.
    env.reset(repo=repo["path"], commit=repo["second"])
    assert env.calls == [] and env.resets == 2
    assert "total > 100" in env.read("shop/pricing.py")
    assert "error" in env.read("../etc/passwd").lower() or "refused" in env.read("../etc/passwd").lower()


def test_reset_needs_the_repo_and_commit_columns(store):
    env = type("Env", (SandboxEnvironment,), {"store": store})()
    with pytest.raises(rewardlab.RewardError, match="no `repo` column"):
        env.reset(prompt="x", commit="HEAD")


def tool_turn(*calls):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls],
    }


def test_tool_features_come_from_the_environments_records(root, repo, store):
    """A conversational completion as TRL's tool loop leaves it, scored with `c` and `e`."""
    env_class = type("Env", (SandboxEnvironment,), {"store": store})
    envs = [env_class(), env_class()]
    completions = []
    for env in envs:
        env.reset(repo=repo["path"], commit=repo["first"])
    # Rollout 0: one turn of two calls (as TRL runs them, in order), then the answer.
    outputs = [envs[0].grep("def total"), envs[0].glob("shop/*.py")]
    completions.append(
        [tool_turn(("grep", {"pattern": "def total"}), ("glob", {"pattern": "shop/*.py"}))]
        + [{"role": "tool", "name": "grep", "content": outputs[0]}, {"role": "tool", "name": "glob", "content": outputs[1]}]
        + [{"role": "assistant", "content": answer(["shop/cart.py"], ["shop/cart.py:5-6"])}]
    )
    # Rollout 1: a call TRL could not deliver (unknown tool), so the environment never saw it.
    completions.append(
        [tool_turn(("find", {"name": "x"})), {"role": "tool", "name": "find", "content": "{'error': 'Tool find not found.'}"}]
        + [{"role": "assistant", "content": answer(["shop/pricing.py"])}]
    )
    target = {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]}
    func = reward_function(root / V2, num_generations=2)
    out, _, metrics = trl_call(func, ["p", "p"], completions, environments=envs, target=[target, target])
    program = rewardlab.load(root / V2)
    records = [
        {"group": "0", "target": target, "valid": True, "truncated": False,
         "predicted": {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]},
         "turns": [[envs[0].calls[0]["record"], envs[0].calls[1]["record"]], []]},
        {"group": "0", "target": target, "valid": True, "truncated": False,
         "predicted": {"files": ["shop/pricing.py"], "line_ranges": []},
         "turns": [[{"tool": "invalid", "entities": []}], []]},
    ]
    assert out == program.score(records).reward.tolist()
    # c = C / T: two calls over two turns, and one (invalid) call over two turns.
    assert rewardlab.features(records, program)["c"].tolist() == [1.0, 0.5]
    assert metrics["rewardlab/c"] == [0.75]
    assert out[0] > 0 and out[1] == 0.0


def test_len_is_left_out_rather_than_overstated_when_tools_answered(root, repo, store):
    env = type("Env", (SandboxEnvironment,), {"store": store})()
    env.reset(repo=repo["path"], commit=repo["first"])
    output = env.glob("*.md")
    completion = [tool_turn(("glob", {"pattern": "*.md"})), {"role": "tool", "name": "glob", "content": output},
                  {"role": "assistant", "content": answer(["README.md"])}]
    func = reward_function("reward = Fb(file) - 0.001 * len")
    with pytest.raises(rewardlab.RewardError, match="completion_tokens"):
        trl_call(func, ["p"], [completion], environments=[env], target=[["README.md"]])
    plain = trl_call(func, ["p"], [answer(["README.md"])], completion_ids=[[7] * 10], target=[["README.md"]])[0]
    assert plain == [1.0 - 0.001 * 10]


def test_calls_past_the_turn_limit_show_nothing_in_the_record(root, repo, store):
    env = type("Env", (SandboxEnvironment,), {"store": store, "limits": {"max_calls_per_turn": 2}})()
    env.reset(repo=repo["path"], commit=repo["first"])
    calls = [("glob", {"pattern": "*.md"}), ("glob", {"pattern": "shop/*.py"}), ("read", {"path": "shop/cart.py"})]
    messages = [tool_turn(*calls)]
    for name, args in calls:
        messages.append({"role": "tool", "name": name, "content": getattr(env, name)(**args)})
    messages.append({"role": "assistant", "content": answer(["shop/cart.py"])})
    func = reward_function("reward = e\n")
    got = trl_call(func, ["p"], [messages], environments=[env], target=[["shop/cart.py"]])[0]
    program = rewardlab.load("reward = e\n")
    first, second, third = (c["record"] for c in env.calls)
    assert third["entities"], "the environment itself served the third call"
    records = [{"group": "0", "target": {"files": ["shop/cart.py"]}, "valid": True, "truncated": False,
                "predicted": {"files": ["shop/cart.py"], "line_ranges": []},
                "turns": [[first, second, {**third, "entities": []}], []]}]
    assert got == program.score(records).reward.tolist()
