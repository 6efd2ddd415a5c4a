"""rewardlab.verl: compute_score in both of verl's forms, and the tool through create/execute/release."""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import rewardlab
from rewardlab import verl
from rewardlab.verl import SandboxTool, compute_score, tool_schemas, trajectory_turns

V3 = "rewards/codegrep_v3.reward"


@pytest.fixture()
def score_file(tmp_path):
    path = tmp_path / "score.reward"
    path.write_text("reward = Fb(file)\n")
    return str(path)


def answer(files, ranges=()):
    return "<answer>" + json.dumps({"files": list(files), "line_ranges": list(ranges)}) + "</answer>"


def as_verl_loads_it(**reward_kwargs):
    """`get_custom_reward_fn`: `pkg://rewardlab.verl` + `compute_score`, reward_kwargs merged last."""
    module = importlib.import_module("rewardlab.verl")
    raw = getattr(module, "compute_score")

    def call(*args, **kwargs):
        return raw(*args, **{**kwargs, **reward_kwargs})

    return functools.wraps(raw)(call)


def test_single_form_returns_the_reward_and_logs_features(score_file):
    score = as_verl_loads_it(reward_file=score_file)
    truth = json.dumps({"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]})
    good = score("swe", "thinking...</think>" + answer(["shop/cart.py"], ["shop/cart.py:5-6"]), truth, {"index": 0})
    bad = score("swe", "no answer here", truth, None)
    program = rewardlab.load(score_file)
    record = {"group": "0", "target": json.loads(truth), "valid": True,
              "predicted": {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]}}
    assert good["score"] == program.score([record]).reward[0]
    assert good["valid_answer"] == 1.0 and bad["valid_answer"] == 0.0
    assert bad["score"] == 0.0
    assert set(program.feature_keys) <= set(good)


def test_batch_form_equals_the_single_form(score_file):
    kwargs = {"reward_file": score_file}
    texts = [answer(["a.py"]), answer(["b.py"]), "nothing", answer(["a.py", "b.py"])]
    truths = [["a.py"], ["a.py"], ["a.py"], {"files": ["a.py", "b.py"], "line_ranges": []}]
    infos = [{"uid": "u0"}, {"uid": "u0"}, {"uid": "u1"}, {"uid": "u1"}]
    batch = compute_score(data_sources=["d"] * 4, solution_strs=texts, ground_truths=truths, extra_infos=infos, **kwargs)
    single = [compute_score("d", t, g, i, **kwargs) for t, g, i in zip(texts, truths, infos)]
    assert [b["score"] for b in batch] == [s["score"] for s in single]
    assert [b["score"] for b in batch][0] > 0 and batch[2]["score"] == 0.0


def test_a_reward_file_is_required(monkeypatch):
    monkeypatch.delenv("REWARDLAB_REWARD_FILE", raising=False)
    with pytest.raises(rewardlab.RewardError, match="reward_kwargs.reward_file"):
        compute_score("d", answer(["a.py"]), ["a.py"])


def test_nan_reward_raises_the_cli_explanation(tmp_path):
    path = tmp_path / "log.reward"
    path.write_text("reward = log(Fb(file))\n")
    with pytest.raises(rewardlab.RewardError, match="`reward` is -inf for rollout 0 of group `0`"):
        compute_score("d", answer(["b.py"]), ["a.py"], reward_file=str(path))


def test_shipped_tool_config_lists_the_schemas(root):
    config = yaml.safe_load((root / "python/examples/verl/tool_config.yaml").read_text())
    assert [t["class_name"] for t in config["tools"]] == ["rewardlab.verl.SandboxTool"] * 3
    assert [t["tool_schema"] for t in config["tools"]] == tool_schemas()
    for entry in config["tools"]:
        function = entry["tool_schema"]["function"]
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])


def tools(store):
    return {s["function"]["name"]: SandboxTool({"type": "native", "store": store}, s) for s in tool_schemas()}


def test_tool_runs_create_execute_release_per_call_and_keys_state_on_the_request(cli, repo, store):
    by_name = tools(store)
    kwargs = {"create_kwargs": {"repo": repo["path"], "commit": repo["first"]}}

    async def call(name, params, request_id, turn):
        tool = by_name[name]
        instance_id, _ = await tool.create(**kwargs)
        agent_data = SimpleNamespace(request_id=request_id, assistant_turns=turn)
        response, reward, metrics = await tool.execute(instance_id, params, agent_data=agent_data)
        await tool.release(instance_id)
        assert instance_id not in tool._instances
        return response.text, reward, metrics

    async def trajectories():
        # Two trajectories interleaved, as verl's agent loops run concurrently.
        return await asyncio.gather(
            call("grep", {"pattern": "def total"}, "r1", 1),
            call("glob", {"pattern": "*.md"}, "r2", 1),
            call("read", {"path": "shop/pricing.py", "start": 1, "end": 2}, "r1", 1),
            call("grep", {"pattern": "discount"}, "r1", 2),
        )

    results = asyncio.run(trajectories())
    done = cli("sandbox", "--repo", repo["path"], "--commit", repo["first"], "grep", "def total")
    assert results[0][0].rstrip("\n") == done.stdout.rstrip("\n")
    assert results[0][1] == 0.0 and results[0][2] == {"status": "ok"}
    r1 = trajectory_turns("r1")
    assert [[c["tool"] for c in turn] for turn in r1] == [["grep", "read"], ["grep"], []]
    assert [[c["tool"] for c in turn] for turn in trajectory_turns("r2", pop=True)] == [["glob"], []]
    assert trajectory_turns("r2") is None

    # compute_score finds the trajectory by its request id and scores its tool use.
    truth = {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]}
    scored = compute_score("d", answer(["shop/cart.py"], ["shop/cart.py:5-6"]), truth, {"request_id": "r1"},
                           reward_file=str(Path(__file__).resolve().parents[2] / V3))
    assert scored["c"] == 1.0  # three calls over three turns (the answer turn included)
    assert trajectory_turns("r1") is None, "scoring consumes the trajectory's records"


def test_malformed_calls_are_answered_not_raised(repo, store):
    grep = tools(store)["grep"]

    async def run():
        instance_id, _ = await grep.create(create_kwargs={"repo": repo["path"], "commit": repo["first"]})
        response, _, metrics = await grep.execute(instance_id, {"patern": "x"})
        await grep.release(instance_id)
        return instance_id, response.text, metrics

    instance_id, text, metrics = asyncio.run(run())
    assert metrics["status"].startswith("error:")
    assert "patern" in text
    # Without verl's agent data the instance id keys the record; a malformed call is logged as `invalid`.
    assert verl.trajectory_turns(instance_id, pop=True) == [[{"tool": "invalid", "entities": []}], []]


def test_create_needs_a_repo(store):
    grep = tools(store)["grep"]
    with pytest.raises(rewardlab.RewardError, match="create_kwargs has no `repo`"):
        asyncio.run(grep.create(create_kwargs={}))
