"""``python -m sarnmt.human COMMAND [key=value ...]``, an alias of ``sarnmt human``: see :mod:`sarnmt.human.cli`."""

from sarnmt.cli import alias
from sarnmt.human.cli import main

if __name__ == "__main__":
    alias("human", main)
