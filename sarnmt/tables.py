"""``python -m sarnmt.tables``: an alias of ``sarnmt tables`` (:mod:`sarnmt.cli.tables`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.tables import main

    alias("tables", main)
