"""Human evaluation, the paper's Table 5: a blind ranking of system outputs by annotators.

- :mod:`~sarnmt.human.task`: create a task (sample sentences, fix each one's hidden order of the systems);
- :mod:`~sarnmt.human.store`: the SQLite database (tasks, items, annotators, one judgement per annotator and item);
- :mod:`~sarnmt.human.app` and ``static/``: the ranking page and its JSON API (a Starlette app), on
  :mod:`~sarnmt.human.server` (uvicorn over h11, with deadlines for slow clients); :mod:`~sarnmt.human.validate`:
  what a request may hold;
- :mod:`~sarnmt.human.export`: Table 5 beside the paper's numbers, raw judgements; :mod:`~sarnmt.human.agreement`:
  Cohen's / Fleiss' kappa;
- the commands, ``sarnmt human create|serve|export|annotators``, are :mod:`sarnmt.cli.human`'s.
"""
