"""The paper's analysis (§8) as commands: ``python -m sarnmt analyze <analysis> [key=value ...]``.

Each analysis is a config, ``sarnmt/conf/analyze/<analysis>.yaml`` (Hydra overrides as for every sarnmt command), and a
pure function of it in :mod:`sarnmt.analysis.commands`. Bad input (a file, a line, a key) is one ``error:`` line,
exit 2, as for every command (:func:`sarnmt.errors.reported`).

Not a Hydra application: the analysis named first picks the primary config, a positional argument that Hydra's
command line has no place for; its overrides are composed by Hydra (:func:`sarnmt.utils.compose.compose`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from sarnmt.analysis import AnalysisError, commands
from sarnmt.errors import InputError, reported
from sarnmt.utils.compose import compose, config_dir

ANALYSES: dict[str, tuple[Callable[[DictConfig], dict[str, Any]], str]] = {
    "figure2": (commands.figure2, "Figure 2: relative position of the self-attention's peak, one curve per model"),
    "figure3": (commands.figure3, "Figure 3: one sentence's self-attention and source attention, a panel per model"),
    "trees": (commands.trees, "§8.2: Algorithm 1's trees, drawn, and ParsEval against gold trees (0.56 / 0.45)"),
    "table7": (commands.table7, "Table 7: sentences where one system beats the other by sentence BLEU, and loses"),
    "agreement": (commands.agreement_probe, "the toy corpus's long-distance agreement, per decoder and distance"),
    "toy_gold": (commands.toy_gold, "a toy split as files, with the references' gold trees (Penn Treebank)"),
}

USAGE = """usage: {prog} <analysis> [key=value ...]
       {prog} <analysis> --help     (its settings: sarnmt/conf/analyze/<analysis>.yaml)

The paper's analysis (§8) over your checkpoints; every file is written under out_dir (outputs/analysis/<analysis>).

{analyses}

Examples, on the toy corpus (docs/analysis.md; python -m sarnmt analyze is the same command):
  sarnmt analyze toy_gold
  sarnmt analyze trees ckpts=[run/checkpoints/last.ckpt] source=outputs/analysis/toy/test.src \\
      target=outputs/analysis/toy/test.ref gold=outputs/analysis/toy/test.trees
"""


def usage(prog: str = "sarnmt analyze") -> str:
    return USAGE.format(prog=prog, analyses="\n".join(f"  {name:<10} {text}" for name, (_, text) in ANALYSES.items()))


def settings(name: str) -> str:
    """The analysis's config file, as its documentation (the package line left out)."""
    text = (config_dir() / "analyze" / f"{name}.yaml").read_text(encoding="utf-8")
    if "  - _runs\n" in text:  # the settings it shares with the other analyses of attention
        text += "\n" + (config_dir() / "analyze" / "_runs.yaml").read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# @package"))


def run(name: str, overrides: list[str]) -> dict[str, Any]:
    """Compose ``sarnmt/conf/analyze/<name>.yaml`` with ``overrides`` and run the analysis.

    :raises AnalysisError: for an unknown analysis or a missing setting (and whatever the analysis raises)."""
    if name not in ANALYSES:
        raise AnalysisError(f"unknown analysis {name!r}; one of: {', '.join(ANALYSES)}")
    cfg = compose(f"analyze/{name}", overrides)
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise AnalysisError(
            f"{name} needs {', '.join(f'{key}=...' for key in missing)} (python -m sarnmt analyze {name} --help)"
        )
    return ANALYSES[name][0](cfg)


def main(argv: list[str], prog: str = "sarnmt analyze") -> int:
    """``prog``: how the command was run, for its usage lines."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(prog))
        return 0 if argv else 2
    name, overrides = argv[0], argv[1:]
    if name in ANALYSES and any(arg in ("-h", "--help") for arg in overrides):
        print(settings(name))
        return 0
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="[%(levelname)s] %(message)s")
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    try:
        with reported():  # one error: line, exit status 2
            try:
                result = run(name, overrides)
            except (AnalysisError, OmegaConfBaseException) as err:
                if isinstance(err, MissingMandatoryValue):
                    raise
                raise InputError(str(err)) from err
    except SystemExit as exit_:
        return int(exit_.code)
    print(result["report"])
    print("wrote: " + ", ".join(str(path) for path in result["files"]), file=sys.stderr)
    return 0
