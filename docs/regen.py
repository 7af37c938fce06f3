"""Regenerate the generated parts of docs/guide.md: the intrinsics table (from
``hydra.intrinsics``), the options table and the host-only table (from the backends'
declared protocols, ``hydra.backends.PROTOCOLS``), the syntax table (from
``hydra.frontend.subset``) and the table of NumPy on per-lane arrays (from the operation
registry, ``hydra.registry``, and ``hydra.numpydoc``).

    python docs/regen.py          # rewrite docs/guide.md
    python docs/regen.py --check  # exit 1 if it is out of date
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hydra

from hydra.backends import PROTOCOLS  # noqa: E402
from hydra.intrinsics import INTRINSICS  # noqa: E402

GUIDE = Path(__file__).with_name("guide.md")


def markdown_table() -> str:
    """The intrinsics table, from the table of ``hydra.intrinsics``."""
    rows = ["| call | result | meaning |", "|---|---|---|"]
    for e in INTRINSICS.values():
        kind = "none" if e.effect else ("varying" if e.varying([True] * e.nargs) else "uniform")
        rows.append(f"| `{e.name}({', '.join(e.params)})` | {kind} | {e.doc} |")
    return "\n".join(rows)


def markdown_tables() -> dict[str, str]:
    """The guide's generated tables: every option on every backend, and what each
    compiled backend runs on the host and why."""
    names = list(PROTOCOLS)
    rows = ["| option | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for option in PROTOCOLS["numpy"].options:
        rows.append(f"| `{option}` | " + " | ".join(PROTOCOLS[n].options[option]
                                                      for n in names) + " |")
    host = ["| backend | runs on the host | why |", "|---|---|---|"]
    for n in names:
        by_reason: dict[str, list[str]] = {}
        for key, why in PROTOCOLS[n].host_only.items():
            by_reason.setdefault(why, []).append(f"`{key}`")
        host += [f"| {n} | {', '.join(keys)} | {why} |" for why, keys in by_reason.items()]
    return {"options": "\n".join(rows), "host": "\n".join(host)}


def subset_table() -> str:
    """The supported syntax, from the one table of ``hydra.frontend.subset``, and the
    constructs it refuses."""
    from hydra.frontend import subset
    rows = ["| kind | construct |", "|---|---|"]
    for kind, table in (("statement", subset.STATEMENTS), ("expression", subset.EXPRESSIONS)):
        rows += [f"| {kind} | {subset.SHOWN[node]} |" for node in table]
    rows.append("| not supported | " + ", ".join(subset.refused()) + " |")
    return "\n".join(rows)


def numpy_table() -> str:
    """Every array operation of the registry: spellings, batching, memory, gradient and
    notes (``hydra.numpydoc``)."""
    from hydra.ir.core import LANE_ARRAY_FNS
    from hydra.numpydoc import NOTES, batched, spellings
    from hydra.registry import AdjointState, records
    rows = ["| operation | spelled | batched | memory | gradient | notes |",
            "|---|---|---|---|---|---|"]
    grads = {AdjointState.RULE: "rule", AdjointState.MISSING: "not yet",
             AdjointState.NOT_DIFFERENTIABLE: "none"}
    for r in sorted(records("array"), key=lambda r: r.name):
        if r.name in LANE_ARRAY_FNS:
            continue
        memory = "view of its operand" if r.memory.aliases == (0,) else \
            "may be a view" if r.memory.aliases else \
            "reads its operands" if r.memory.reads else "numbers only"
        rows.append(f"| `{r.name}` | {', '.join(spellings(r.name, r.aliases))} | {batched(r.name)} "
                    f"| {memory} | {grads[r.adjoint.state]} | {NOTES.get(r.name, '')} |")
    return "\n".join(rows)


def regenerated(text: str) -> str:
    tables = {"intrinsics": markdown_table(), **markdown_tables(), "subset": subset_table(),
              "numpy": numpy_table()}
    for name, table in tables.items():
        block = re.compile(rf"(<!-- {name}:start -->\n).*?(\n<!-- {name}:end -->)", re.S)
        text = block.sub(lambda m: m.group(1) + table + m.group(2), text)
    return text


def main() -> int:
    text = GUIDE.read_text()
    new = regenerated(text)
    if "--check" in sys.argv:
        return 0 if new == text else 1
    GUIDE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
