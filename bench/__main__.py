"""``python -m bench``: run every benchmark and print the table (see ``run.py``)."""

from .run import main

main()
