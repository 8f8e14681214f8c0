"""``python -m sarnmt.reproduce``: an alias of ``sarnmt reproduce`` (:mod:`sarnmt.cli.reproduce`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.reproduce import main

    alias("reproduce", main)
