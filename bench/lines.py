"""Issue 23's line count: whose commit wrote each line of ``hydra/``.

``python -m bench.lines [REV] [-v]`` runs ``git blame -w -M -C`` over every module of
``hydra/`` at ``REV`` (default HEAD) and gives each line to the issue whose branch wrote
it.  A commit belongs to the branch a merge after ``BASE`` (the landing where issue 23
was filed, 18,302 lines) brought in; the lead's direct commits on main count as core,
except those ``MAIN_FOR`` gives to the issue whose feature they fixed or finished (by
their subjects).  Issue 23's target is "fewer lines than 18,302, new features of other
issues aside": the lines from before ``BASE``, issue 23's branches (``i23-*``,
``s-native``, the ``c-*`` cuts) and the core commits on main.  A line a later commit
rewrote counts for that commit (so a cut counts only by what it removes net), and code
moved between files keeps its author (``-C``)."""

from __future__ import annotations

import collections
import re
import subprocess
import sys

BASE = "d958480"
#: the lead's commits on main that fixed or finished another issue's feature
MAIN_FOR = {"0a85055": "32", "573e650": "32", "093c4c9": "32", "667f0ac": "31",
            "4b53d46": "29", "2afd21e": "29", "58f1b9a": "28", "1a92a11": "30",
            "b8d518e": "24", "b3a7614": "25"}
#: branches named after something other than their issue
BRANCH_ISSUE = {"s-native": "23", "s-cuda": "31", "s-chains": "31", "s-sweeps": "28",
                "s-digits": "28", "s-conv": "29", "s-jax": "28/29"}
CORE = ("base", "23", "main")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=True).stdout


def issue_of(branch: str) -> str:
    if branch.startswith("c-"):
        return "23"
    if branch in BRANCH_ISSUE:
        return BRANCH_ISSUE[branch]
    m = re.match(r"i(\d+)", branch)
    return m.group(1) if m else branch


def owners(rev: str) -> dict[str, str]:
    """commit -> the branch (or "main", or an issue of MAIN_FOR) that wrote it."""
    owner: dict[str, str] = {}
    for line in reversed(_git("log", "--merges", "--format=%H %P|%s",
                              f"{BASE}..{rev}").splitlines()):
        hashes, subject = line.split("|", 1)
        _, first, second = hashes.split()[:3]
        name = re.search(r"Merge branch '([^']+)'", subject).group(1)
        for c in _git("rev-list", f"{first}..{second}").split():
            owner.setdefault(c, name)
    for c in _git("rev-list", "--first-parent", f"{BASE}..{rev}").split():
        fixed = next((i for k, i in MAIN_FOR.items() if c.startswith(k)), None)
        owner.setdefault(c, f"i{fixed}" if fixed else "main")
    return owner


def count(rev: str = "HEAD") -> dict[str, collections.Counter]:
    """module -> Counter(issue -> lines)."""
    owner, before = owners(rev), set(_git("rev-list", BASE).split())
    out = {}
    for path in _git("ls-tree", "-r", "--name-only", rev, "hydra").split():
        if not path.endswith(".py"):
            continue
        lines: collections.Counter = collections.Counter()
        for line in _git("blame", "-w", "-M", "-C", "--line-porcelain", rev, "--",
                         path).splitlines():
            if re.match(r"^[0-9a-f]{40} \d+ \d+", line):
                c = line.split()[0]
                lines["base" if c in before else issue_of(owner.get(c, "?"))] += 1
        out[path] = lines
    return out


def main(argv: list[str]) -> None:
    rev = next((a for a in argv if not a.startswith("-")), "HEAD")
    per_module = count(rev)
    total = sum(per_module.values(), collections.Counter())
    print(f"hydra/ at {rev}: {sum(total.values())} lines")
    for issue, n in total.most_common():
        print(f"  {issue:6s} {n:6d}")
    core = sum(total[k] for k in CORE)
    print(f"before issue 23 + issue 23 + core fixes: {core} (issue 23's target: < 18302)")
    if "-v" in argv:
        for path, c in sorted(per_module.items(), key=lambda kv: -sum(kv[1].values())):
            print(f"{sum(c.values()):5d} core={sum(c[k] for k in CORE):5d} {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
