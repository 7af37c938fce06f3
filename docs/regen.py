"""Regenerate the generated parts of docs/guide.md (the intrinsics table).

    python docs/regen.py          # rewrite docs/guide.md
    python docs/regen.py --check  # exit 1 if it is out of date
"""

import re
import sys
from pathlib import Path

from hydra.intrinsics import markdown_table

GUIDE = Path(__file__).with_name("guide.md")
BLOCK = re.compile(r"(<!-- intrinsics:start -->\n).*?(\n<!-- intrinsics:end -->)", re.S)


def regenerated(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + markdown_table() + m.group(2), text)


def main() -> int:
    text = GUIDE.read_text()
    new = regenerated(text)
    if "--check" in sys.argv:
        return 0 if new == text else 1
    GUIDE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
