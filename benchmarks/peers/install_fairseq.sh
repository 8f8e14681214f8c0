#!/usr/bin/env bash
# fairseq 0.12.2 (the last release, 2022) in its own virtual environment, for the side-by-side benchmark
# (benchmarks/peers/side_by_side.py). usage: benchmarks/peers/install_fairseq.sh VENV  (default outputs/peers/fairseq)
#
# fairseq 0.12.2 predates Python 3.11 and torch 2.6; four things keep it from installing or running as is, each
# patched here in the installed copy only:
#   1. its PyPI sdist names a C++ source it does not ship (fairseq/clib/libbase/balanced_assignment.cpp): the torch C++
#      extensions (libbase, libnat: not used by RNN translation) are dropped from setup.py; the Cython ones stay;
#   2. Python 3.11 refuses dataclass fields whose default is a mutable instance (FairseqConfig's sub-configs): they
#      become default_factory fields...
#   3. ...which hydra_init then reads through .default, so it learns to call the factory;
#   4. torch.load defaults to weights_only=True since torch 2.6; fairseq checkpoints pickle an argparse.Namespace.
# torch is installed first and fairseq with --no-deps, so nothing pulls a CUDA build of torch: on a CPU machine
# PIP_TORCH=torch==2.13.0 takes the local CPU wheel (the default); set PIP_TORCH to what your machine uses.
# When it cannot be installed (no network, a version conflict) it says so in one line, naming the step and the log,
# and exits non-zero.
set -euo pipefail
VENV=$(realpath -m "${1:-outputs/peers/fairseq}")
PIP_TORCH=${PIP_TORCH:-torch==2.13.0}
log=$(mktemp)
exec 3>&2 >>"$log" 2>&1
trap 'echo "install_fairseq: fairseq 0.12.2 not installed in $VENV: \"$BASH_COMMAND\" failed ($(grep -m1 -iE \
"error|conflict|no matching" "$log" | cut -c1-200); full log $log)" >&3' ERR
python3 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q "$PIP_TORCH"
"$PIP" install -q cython numpy cffi regex tqdm bitarray sacrebleu 'hydra-core==1.3.2' 'omegaconf==2.3.0' setuptools wheel
src=$(mktemp -d)
"$PIP" download -q --no-deps --no-binary :all: --no-build-isolation fairseq==0.12.2 -d "$src"
tar xzf "$src"/fairseq-0.12.2.tar.gz -C "$src"
"$VENV/bin/python" - "$src/fairseq-0.12.2/setup.py" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
start = text.index('            cpp_extension.CppExtension(\n                "fairseq.libbase"')
end = text.index('    if "CUDA_HOME" in os.environ:')
block = text[start:end]
# keep the list's closing brackets: drop only the C++ extensions inside extensions.extend([...])
inner_end = block.rindex("        ]\n    )\n")
text = text[:start] + block[inner_end:] + text[end:]
open(path, "w").write(text)
PY
(cd "$src/fairseq-0.12.2" && "$PIP" install -q --no-deps --no-build-isolation .)
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/fairseq
"$VENV/bin/python" - "$site" <<'PY'
import re, sys
site = sys.argv[1]
def edit(rel, fn):
    path = f"{site}/{rel}"
    text = open(path).read()
    new = fn(text)
    if new == text:
        sys.exit(f"install_fairseq: nothing to patch in {path} (another fairseq version?)")
    open(path, "w").write(new)
# 2. mutable dataclass defaults -> default_factory
factory = lambda t: re.sub(r"^(    \w+: (\w+Config)) = \w+Config\(\)$", r"\1 = field(default_factory=\2)", t, flags=re.M)
edit("dataclass/configs.py", factory)
edit("models/transformer/transformer_config.py",
     lambda t: factory(t).replace("field(default=QuantNoiseConfig())", "field(default_factory=QuantNoiseConfig)"))
# 3. hydra_init: a default_factory field has no .default
edit("dataclass/initialize.py", lambda t: t.replace(
    "        v = FairseqConfig.__dataclass_fields__[k].default\n",
    "        f = FairseqConfig.__dataclass_fields__[k]\n"
    "        v = f.default_factory() if f.default is dataclasses.MISSING else f.default\n").replace(
    "import logging\n", "import dataclasses\nimport logging\n", 1))
# 4. fairseq's own checkpoints are trusted here: they pickle an argparse.Namespace
edit("checkpoint_utils.py", lambda t: t.replace(
    'state = torch.load(f, map_location=torch.device("cpu"))',
    'state = torch.load(f, map_location=torch.device("cpu"), weights_only=False)'))
PY
rm -rf "$src"
"$VENV/bin/fairseq-train" --help > /dev/null
rm -f "$log"
echo "fairseq 0.12.2 installed in $VENV" >&3
