#!/usr/bin/env bash
# JoeyNMT 2.3.0 (the last release, 2024) in its own virtual environment, for the quality comparison
# (benchmarks/peers/quality/, make peers-quality). usage: benchmarks/peers/install_joeynmt.sh VENV
# (default outputs/peers/joeynmt)
#
# torch is installed first (PIP_TORCH, default torch==2.13.0: on a CPU machine the local CPU wheel) and then joeynmt
# from PyPI with every dependency it declares, under a constraint that holds torch at the installed build, so nothing
# pulls a CUDA torch. JoeyNMT 2.3.0 predates torch 2.6; what keeps it from running is patched here, in the installed
# copy only:
#   1. torch 2.13's ReduceLROnPlateau has no `verbose` argument any more (deprecated in 2.2, then removed): the
#      plateau scheduler's kwargs lose "verbose": False (builders.py);
#   2. torch.load defaults to weights_only=True since torch 2.6; a JoeyNMT checkpoint holds its batch sampler's
#      state and training statistics beside the weights: its own checkpoints are loaded with weights_only=False
#      (helpers.load_checkpoint);
#   3. helpers.py imports importlib_metadata, which joeynmt does not declare (a dependency of an older setuptools
#      brought it in 2024): it is installed beside it. No file changes for this one.
# When it cannot be installed (no network, a version conflict) it says so in one line and exits non-zero; the
# quality driver then runs without JoeyNMT and its table says "not run".
set -uo pipefail
VENV=$(realpath -m "${1:-outputs/peers/joeynmt}")
PIP_TORCH=${PIP_TORCH:-torch==2.13.0}
log=$(mktemp)
fail() {
    echo "install_joeynmt: JoeyNMT 2.3.0 not installed in $VENV: $1 ($(grep -m1 -iE 'error|conflict|no matching' "$log" \
        | cut -c1-200); full log $log)" >&2
    exit 1
}
python3 -m venv "$VENV" >>"$log" 2>&1 || fail "python3 -m venv failed"
PIP="$VENV/bin/pip"
"$PIP" install -q "$PIP_TORCH" >>"$log" 2>&1 || fail "$PIP_TORCH could not be installed"
torch_version=$("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) || fail "torch does not import"
echo "torch==$torch_version" > "$VENV/constraints-torch.txt"
"$PIP" install -q -c "$VENV/constraints-torch.txt" joeynmt==2.3.0 >>"$log" 2>&1 \
    || fail "pip install joeynmt==2.3.0 failed (no network, or a dependency conflicts with torch $torch_version)"
"$PIP" install -q -c "$VENV/constraints-torch.txt" importlib_metadata >>"$log" 2>&1 \
    || fail "pip install importlib_metadata (undeclared by joeynmt, imported by it) failed"
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/joeynmt
"$VENV/bin/python" - "$site" <<'PY' >>"$log" 2>&1 || fail "patching the installed copy failed (another version?)"
import sys
site = sys.argv[1]
def edit(rel, old, new):
    path = f"{site}/{rel}"
    text = open(path).read()
    if old not in text:
        sys.exit(f"install_joeynmt: nothing to patch in {path} (another JoeyNMT version?)")
    open(path, "w").write(text.replace(old, new))
# 1. ReduceLROnPlateau(verbose=...) is gone from torch
edit("builders.py", '            "verbose": False,\n', "")
# 2. JoeyNMT's own checkpoints are trusted here: they hold the sampler state and statistics beside the weights
edit("helpers.py", "checkpoint = torch.load(path, map_location=map_location)",
     "checkpoint = torch.load(path, map_location=map_location, weights_only=False)")
PY
"$VENV/bin/python" -m joeynmt --help >>"$log" 2>&1 || fail "python -m joeynmt --help fails after installing"
version=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("joeynmt"))')
[ "$version" = 2.3.0 ] || fail "pip installed joeynmt $version, not 2.3.0"
rm -f "$log"
echo "joeynmt 2.3.0 installed in $VENV (torch $torch_version)"
