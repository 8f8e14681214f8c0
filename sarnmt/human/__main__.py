"""``python -m sarnmt.human``: an alias of ``sarnmt human`` (:mod:`sarnmt.cli.human`), kept for scripts; it runs the
command-line program by name (:func:`sarnmt.utils.hydra_app.run_alias`), as the ``sarnmt`` script does, so that
nothing in :mod:`sarnmt.human`, below the commands' floor, imports :mod:`sarnmt.cli`."""

if __name__ == "__main__":
    from sarnmt.utils.hydra_app import run_alias

    run_alias()
