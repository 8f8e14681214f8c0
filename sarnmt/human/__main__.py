"""``python -m sarnmt.human COMMAND [key=value ...]``, an alias of ``sarnmt human``: see :mod:`sarnmt.human.cli`."""

from sarnmt.human.cli import main
from sarnmt.utils.hydra_app import run_as_module

if __name__ == "__main__":
    run_as_module("python -m sarnmt.human", main, hydra=False)
