#!/usr/bin/env bash
# 100 greps through `rewardlab sandbox --json` in one process, with the content index and
# without it (`--no-index`), on a real bare mirror, beside 100 `git grep -n` on a worktree. The
# result cache is off (`--no-cache`), so every repeated pattern runs again, as each git grep does.
# The first indexed process builds the index (in the background, while it greps) and persists it
# under the store when it exits; a second indexed process starts from that file.
#
#   scripts/sandbox-greps.sh /work/mirrors/sympy__sympy.git [REV] [REWARDLAB_BINARY]
#
# The mirror is only read: the store adopts it through a symlink in a temporary directory and
# the worktree is a `git clone --shared` beside it, both removed at the end.
set -euo pipefail

mirror=$(cd "${1:?usage: $0 MIRROR.git [REV] [BINARY]}" && pwd)
rev=${2:-HEAD}
bin=${3:-target/release/rewardlab}
name=$(basename "$mirror" .git)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/store"
ln -s "$mirror" "$work/store/$name.git"
commit=$(git --git-dir="$mirror" rev-parse "$rev^{commit}")
git clone -q --shared --no-checkout "$mirror" "$work/checkout"
git -C "$work/checkout" checkout -q --detach "$commit"

# A mix of selective and common patterns, repeated to 100 calls.
patterns=('def simplify' 'class Matrix' 'import' 'raise ValueError' 'TODO|FIXME' 'def _eval_[a-z]+\('
          'NotImplementedError' 'self\.args\[0\]' 'lambdify' 'return S\.Zero')
calls=$work/calls.jsonl
for i in $(seq 0 99); do
  p=${patterns[$((i % ${#patterns[@]}))]}
  printf '{"tool": "grep", "args": {"pattern": "%s"}}\n' "${p//\\/\\\\}" >>"$calls"
done

run() {
  local start end
  start=$(date +%s.%N)
  "$bin" sandbox --repo "$name" --commit "$commit" --store "$work/store" --json "$@" <"$calls" >"$work/out-$#.jsonl"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
indexed=$(run --no-cache)
scanned=$(run --no-cache --no-index)
cmp -s "$work/out-1.jsonl" "$work/out-2.jsonl" || { echo "indexed and scanned results differ" >&2; exit 1; }
persisted=$(run --no-cache)
cmp -s "$work/out-1.jsonl" "$work/out-2.jsonl" || { echo "indexed (persisted) and scanned results differ" >&2; exit 1; }
start=$(date +%s.%N)
for i in $(seq 0 99); do
  p=${patterns[$((i % ${#patterns[@]}))]}
  git -C "$work/checkout" grep -n -I -P -e "$p" >/dev/null || true
done
end=$(date +%s.%N)
git_total=$(echo "$end - $start" | bc)
echo "$name @ ${commit:0:12}: 100 greps in one process: indexed ${indexed} s (index built meanwhile), indexed ${persisted} s (second process, index persisted), scan (--no-index) ${scanned} s; 100 git grep -n: ${git_total} s"
