"""rewardlab.load / Program.evaluate / rewardlab.features against the CLI on the same inputs."""

from __future__ import annotations

import csv
import io
import json
import random

import numpy as np
import pytest

import rewardlab
from rewardlab import RewardError

V2 = "rewards/codegrep_v2.reward"

ROLLOUTS = [
    {
        "group": "g1",
        "predicted": {"files": ["a.py"], "line_ranges": ["a.py:1-3"]},
        "target": {"files": ["a.py", "b.py"], "line_ranges": ["a.py:2-4"]},
        "turns": [[{"tool": "grep", "args": {"pattern": "x"}, "entities": ["a.py:3", "b.py:4"]}], []],
    },
    {
        "group": "g2",
        "predicted": {"files": ["a.py"], "line_ranges": []},
        "target": {"files": ["a.py"], "line_ranges": ["a.py:9-9"]},
        "turns": [[]],
    },
    {
        "group": "g1",
        "predicted": {"files": ["c.py"], "line_ranges": ["c.py:1-2"]},
        "target": {"files": ["a.py", "b.py"], "line_ranges": ["a.py:2-4"]},
        "turns": [
            [
                {"tool": "grep", "args": {"pattern": "x"}, "entities": ["a.py:3"]},
                {"tool": "glob", "args": {"pattern": "*.py"}, "entities": ["a.py", "c.py"]},
            ],
            [],
        ],
    },
    {
        "group": "g2",
        "predicted": {"files": ["a.py"], "line_ranges": ["a.py:9-9"]},
        "target": {"files": ["a.py"], "line_ranges": ["a.py:9-9"]},
        "turns": [[{"tool": "read", "args": {"path": "a.py"}, "entities": ["a.py:1"]}], []],
    },
]


def cli_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow([repr(v) if isinstance(v, float) else v for v in row])


def test_load_reads_a_file_and_lists_what_it_reads(root):
    program = rewardlab.load(root / V2)
    assert program.feature_keys == ["Fb(file)", "Fb(lr)", "c"]
    assert program.name == str(root / V2)
    # v2's advantage discount lets a rollout that did nothing outrank a weak sibling: the one warning.
    assert len(program.warnings) == 1, program.warnings
    assert "higher `advantage`" in program.warnings[0]
    assert program.params == {}


def test_load_takes_text_and_params():
    program = rewardlab.load("param w = 0.5\nreward = w * Fb(file)\n", params={"w": 2.0})
    assert program.params == {"w": 2.0}
    out = program.evaluate({"Fb(file)": [0.25, 0.5]}, ["a", "a"])
    assert out.reward.tolist() == [0.5, 1.0]


def test_unknown_param_is_refused_naming_the_declared_ones():
    with pytest.raises(RewardError, match=r"param `v`: the reward file declares no such param \(it declares: w\)"):
        rewardlab.load("param w = 0.5\nreward = w * Fb(file)\n", params={"v": 1.0})


def test_diagnostics_are_the_cli_text(cli, tmp_path):
    bad = tmp_path / "bad.reward"
    bad.write_text("let s = Fb(file)\nreward = 0.5 * grades(word) + s\nadvantage = adv * c\n")
    done = cli("check", str(bad))
    assert done.returncode == 1
    with pytest.raises(RewardError) as caught:
        rewardlab.load(bad)
    message = str(caught.value)
    assert "bad.reward:2:" in message and "^" in message, message
    assert message.rstrip("\n") == done.stderr.rstrip("\n")
    assert len(caught.value.diagnostics) >= 1
    assert all(str(bad) in d for d in caught.value.diagnostics)


def test_warnings_are_the_cli_text(cli, tmp_path):
    scaled = tmp_path / "scaled.reward"
    scaled.write_text("reward = Fb(file) * e\n")
    done = cli("check", "--quiet", str(scaled))
    assert done.returncode == 0, done.stderr
    program = rewardlab.load(scaled)
    assert program.warnings, "scaling the whole reward by efficiency is linted"
    assert "warning" in program.warnings[0]
    assert program.warnings_text.rstrip("\n") == done.stderr.rstrip("\n")


def test_evaluate_equals_cli_eval_on_the_same_csv(cli, root, tmp_path):
    rng = random.Random(7)
    rows = []
    for i in range(60):
        # Groups interleave, so the binding must group by first appearance exactly as the CSV reader does.
        group = f"p{rng.randrange(8)}"
        rows.append([group, rng.random(), rng.choice([0.0, 1.0, rng.random()]), rng.choice([0.0, 0.5, 2.0, 5.0])])
    # Every group needs two rollouts for the checker's assumption; make sure of it.
    rows += [[f"p{g}", 0.5, 0.5, 1.0] for g in range(8)] * 2
    path = tmp_path / "features.csv"
    write_csv(path, ["group", "Fb(file)", "Fb(lr)", "c"], rows)
    done = cli("eval", V2, "--rollouts", str(path))
    assert done.returncode == 0, done.stderr
    expected = cli_rows(done.stdout)
    program = rewardlab.load(root / V2)
    features = {
        "Fb(file)": np.array([r[1] for r in rows]),
        "Fb(lr)": np.array([r[2] for r in rows]),
        "c": np.array([r[3] for r in rows]),
    }
    out = program.evaluate(features, [r[0] for r in rows])
    assert len(expected) == len(rows)
    for name in ("reward", "adv", "advantage"):
        got = getattr(out, name)
        assert got.dtype == np.float64
        assert got.tolist() == [float(r[name]) for r in expected], name


def test_features_from_rollouts_equal_cli_eval_on_jsonl(cli, root, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROLLOUTS))
    done = cli("eval", V2, "--rollouts", str(path))
    assert done.returncode == 0, done.stderr
    expected = cli_rows(done.stdout)
    program = rewardlab.load(root / V2)
    columns = rewardlab.features(ROLLOUTS, program)
    assert list(columns) == ["Fb(file)", "Fb(lr)", "c"]
    for key in columns:
        assert columns[key].tolist() == [float(r[key]) for r in expected], key
    out = program.score(ROLLOUTS)
    for name in ("reward", "adv", "advantage"):
        assert getattr(out, name).tolist() == [float(r[name]) for r in expected], name


def cli_error(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert lines, done.stderr
    return lines[-1][len("error: ") :]


def test_non_finite_fault_is_the_cli_message(cli, tmp_path):
    reward = tmp_path / "log.reward"
    reward.write_text("reward = log(Fb(file))\n")
    path = tmp_path / "f.csv"
    write_csv(path, ["group", "Fb(file)"], [["a", 0.5], ["a", 0.0], ["b", 1.0], ["b", 0.25]])
    done = cli("eval", str(reward), "--rollouts", str(path))
    assert done.returncode != 0
    program = rewardlab.load(reward)
    with pytest.raises(RewardError) as caught:
        program.evaluate({"Fb(file)": np.array([0.5, 0.0, 1.0, 0.25])}, ["a", "a", "b", "b"])
    assert str(caught.value) == cli_error(done)
    assert "group `a`" in str(caught.value)
    allowed = program.evaluate({"Fb(file)": [0.5, 0.0, 1.0, 0.25]}, ["a", "a", "b", "b"], allow_non_finite=True)
    assert allowed.reward[1] == -np.inf


def test_short_group_is_the_cli_message(cli, root, tmp_path):
    path = tmp_path / "f.csv"
    rows = [["a", 1.0, 1.0, 1.0], ["a", 0.0, 0.0, 1.0], ["b", 1.0, 0.5, 2.0]]
    write_csv(path, ["group", "Fb(file)", "Fb(lr)", "c"], rows)
    done = cli("eval", V2, "--rollouts", str(path), "--group-size", "2")
    assert done.returncode != 0
    program = rewardlab.load(root / V2)
    features = {k: [r[i + 1] for r in rows] for i, k in enumerate(["Fb(file)", "Fb(lr)", "c"])}
    with pytest.raises(RewardError) as caught:
        program.evaluate(features, [r[0] for r in rows], group_size=2)
    assert str(caught.value) == cli_error(done)
    assert str(caught.value) == "group `b` has 1 rollouts, 2 were declared"


def test_missing_feature_names_it(root):
    program = rewardlab.load(root / V2)
    with pytest.raises(RewardError, match="the program reads feature `Fb\\(lr\\)`, which the input does not provide"):
        program.evaluate({"Fb(file)": [1.0, 0.0], "c": [1.0, 1.0]}, ["a", "a"])


def test_column_lengths_must_agree(root):
    program = rewardlab.load(root / V2)
    with pytest.raises(RewardError, match="column `Fb\\(lr\\)` has 1 values, the table has 2 rows"):
        program.evaluate({"Fb(file)": [1.0, 0.0], "Fb(lr)": [1.0], "c": [1.0, 1.0]}, ["a", "a"])


def test_numpy_dtypes_and_layouts_give_the_same_result(root):
    program = rewardlab.load(root / V2)
    rng = np.random.default_rng(3)
    fb = rng.random(64)
    lr = rng.random(64)
    calls = rng.integers(0, 6, 64)
    groups = np.repeat(np.arange(8), 8)
    base = program.evaluate({"Fb(file)": fb, "Fb(lr)": lr, "c": calls.astype(np.float64)}, groups)
    wide = np.stack([fb, lr])  # rows of a 2-D array: a non-contiguous column is a strided view
    variants = [
        {"Fb(file)": wide.T[:, 0], "Fb(lr)": wide.T[:, 1], "c": calls},  # strided views, int64
        {"Fb(file)": fb.tolist(), "Fb(lr)": lr.tolist(), "c": calls.astype(np.int32)},  # lists, int32
        {"Fb(file)": fb, "Fb(lr)": lr, "c": calls.astype(np.float32)},  # float32 (exact for small ints)
    ]
    for features in variants:
        out = program.evaluate(features, groups)
        for name in ("reward", "adv", "advantage"):
            assert getattr(out, name).tolist() == getattr(base, name).tolist(), name
    by_size = program.evaluate({"Fb(file)": fb, "Fb(lr)": lr, "c": calls}, 8)
    assert by_size.advantage.tolist() == base.advantage.tolist()
    as_strings = program.evaluate({"Fb(file)": fb, "Fb(lr)": lr, "c": calls}, [str(g) for g in groups])
    assert as_strings.advantage.tolist() == base.advantage.tolist()
    bools = rewardlab.load("reward = Fb(file) * mask(c > 0)")
    flags = bools.evaluate({"Fb(file)": np.array([True, False]), "c": [1, 1]}, ["a", "a"])
    assert flags.reward.tolist() == [1.0, 0.0]


def test_outputs_are_float64_arrays_owned_by_numpy(root):
    program = rewardlab.load(root / V2)
    out = program.evaluate({"Fb(file)": [1.0, 0.0], "Fb(lr)": [1.0, 0.0], "c": [1.0, 1.0]}, ["a", "a"])
    for array in out:
        assert isinstance(array, np.ndarray) and array.dtype == np.float64 and array.flags.c_contiguous
        assert array.flags.owndata or array.base is not None


def test_zero_length_inputs(root):
    program = rewardlab.load(root / V2)
    empty = np.array([], dtype=np.float64)
    out = program.evaluate({"Fb(file)": empty, "Fb(lr)": empty, "c": empty}, [])
    assert [a.shape for a in out] == [(0,), (0,), (0,)]
    assert all(a.dtype == np.float64 for a in out)
    assert [len(v) for v in rewardlab.features([], program).values()] == [0, 0, 0]


def test_two_dimensional_features_are_refused(root):
    program = rewardlab.load(root / V2)
    with pytest.raises(RewardError, match="feature `Fb\\(file\\)`: expected a 1-D array"):
        program.evaluate({"Fb(file)": [[1.0], [0.0]], "Fb(lr)": [1.0, 0.0], "c": [1.0, 1.0]}, ["a", "a"])


def test_bad_rollout_and_unavailable_feature_are_named(root):
    program = rewardlab.load(root / V2)
    with pytest.raises(RewardError, match=r"rollouts\[0\]: `group` is empty"):
        rewardlab.features([{"group": ""}], program)
    record = dict(ROLLOUTS[0])
    del record["turns"]
    with pytest.raises(RewardError, match="feature `c` is not provided by my data: rollout 0 \\(group `g1`\\) has no"):
        rewardlab.features([record], program, source="my data")


def test_parse_answer_is_strict():
    answer, reason = rewardlab.parse_answer('<answer>{"files": ["./a.py"], "line_ranges": ["a.py:3-4"]}</answer>')
    assert reason is None and answer == {"files": ["a.py"], "line_ranges": ["a.py:3-4"]}
    for bad in ["no answer", '<answer>{"files": ["a.py"]}</answer>', '<answer>{"files": ["/etc/passwd"], "line_ranges": []}</answer>']:
        answer, reason = rewardlab.parse_answer(bad)
        assert answer is None and reason
