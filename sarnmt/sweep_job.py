"""``python -m sarnmt.sweep_job``: an alias of ``sarnmt sweep-job`` (:mod:`sarnmt.cli.sweep_job`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.sweep_job import main

    alias("sweep-job", main)
