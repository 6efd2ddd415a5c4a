#!/usr/bin/env python3
"""Which traceback frame of an issue names the file its fix changes.

    scripts/traceback-frames.py MIRRORS_DIR INSTANCES.jsonl

For every SWE-bench-style instance (`instance_id`, `repo`, `base_commit`, `problem_statement`,
`patch`) whose repository has a bare clone `MIRRORS_DIR/owner__name.git`, the Python traceback
frames of the issue text (`File "…/pkg/mod.py", line N` and pytest's `…/pkg/mod.py:N: in name`)
are mapped to the files of the tree at the base commit by their longest path suffix that names
exactly one file (two components at least: a bare `__init__.py` names nothing). Consecutive frames
in one file count once. Prints, per instance with at least one mapped frame, whether the innermost
(last) and the outermost (first) mapped frame is a file of the gold patch, then the counts.
The mirrors are only read.
"""
import collections
import json
import re
import subprocess
import sys

FRAMES = [
    re.compile(r'File "([^"]+\.py)", line \d+'),
    re.compile(r"^\s*([\w./\\-]+\.py):\d+: in \w+", re.M),
]


def tree_files(git_dir, commit):
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit],
        capture_output=True, text=True, check=True,
    ).stdout
    return out.split("\n")


def mapped_frames(text, files):
    frames = sorted((m.start(), m.group(1)) for rx in FRAMES for m in rx.finditer(text))
    mapped = []
    for _, frame in frames:
        parts = frame.replace("\\", "/").split("/")
        for k in range(len(parts), 1, -1):
            suffix = "/".join(parts[-k:])
            hits = [f for f in files if f == suffix or f.endswith("/" + suffix)]
            if len(hits) == 1:
                if not mapped or mapped[-1] != hits[0]:
                    mapped.append(hits[0])
                break
    return mapped


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    mirrors, instances = sys.argv[1], sys.argv[2]
    counts = collections.Counter()
    for line in open(instances, encoding="utf-8"):
        r = json.loads(line)
        git_dir = f"{mirrors}/{r['repo'].replace('/', '__')}.git"
        try:
            files = tree_files(git_dir, r["base_commit"])
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
        counts["instances with a mirror"] += 1
        mapped = mapped_frames(r["problem_statement"], files)
        if not mapped:
            continue
        gold = set(re.findall(r"^diff --git a/(\S+)", r["patch"], re.M))
        inner, outer = mapped[-1] in gold, mapped[0] in gold
        counts["with mapped frames"] += 1
        counts["more than one framed file"] += len(set(mapped)) > 1
        counts["innermost is gold"] += inner
        counts["outermost is gold"] += outer
        counts["any is gold"] += any(f in gold for f in mapped)
        print(f"{r['instance_id']}: {len(set(mapped))} framed files, innermost gold {inner}, outermost gold {outer}")
    for key, value in counts.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
