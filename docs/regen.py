"""Regenerate the generated parts of docs/guide.md: the intrinsics table (from
``hydra.intrinsics``), the options table and the host-only table (from the backends'
declared protocols, ``hydra.backends.PROTOCOLS``).

    python docs/regen.py          # rewrite docs/guide.md
    python docs/regen.py --check  # exit 1 if it is out of date
"""

import re
import sys
from pathlib import Path

from hydra.backends import markdown_tables
from hydra.intrinsics import markdown_table

GUIDE = Path(__file__).with_name("guide.md")


def regenerated(text: str) -> str:
    for name, table in {"intrinsics": markdown_table(), **markdown_tables()}.items():
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
