"""``python -m sarnmt.human``: an alias of ``sarnmt human`` (:mod:`sarnmt.cli.human`), kept for scripts. An entry
point run as ``__main__``, never imported: it finds the dispatcher by name at run time, as the ``sarnmt`` script does,
so that nothing in :mod:`sarnmt.human`, below the commands' floor, imports :mod:`sarnmt.cli`."""

if __name__ == "__main__":
    from importlib import import_module

    import_module("sarnmt.cli").alias("human")
