# sarnmt: run `make help` for the targets.
VENV      ?= .venv
PY        := $(VENV)/bin/python
EXTRAS    ?= dev,slurm,docs
SCALE     ?= smoke
PIP_FLAGS ?= -c constraints-cpu.txt
# make gpu-wheels: the GPU node's Python and platform; make gpu-check: its Python (the venv's when there is one)
PY_VERSION ?= 3.12
PLATFORM  ?= manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
GPU_PY    ?= $(if $(wildcard $(PY)),$(PY),python3)

.DEFAULT_GOAL := help

help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)

install: $(PY)  ## create .venv and install sarnmt with CPU torch (GPU users: make install PIP_FLAGS=)
	$(PY) -m pip install -q $(PIP_FLAGS) -e '.[$(EXTRAS)]'
	$(PY) -c "import torch; print('torch', torch.__version__, 'cuda' if torch.version.cuda else 'cpu')"

browser:  ## Debian's chromium for the ranking page's browser test (apt-get, only if missing; root or sudo)
	@command -v chromium >/dev/null 2>&1 && echo "chromium: $$(command -v chromium)" || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# make test: every module but the long tests (marked slow: tests/conftest.py's SLOW table, the fault suite, SLURM, GPU),
# in TEST_JOBS pytest-xdist workers (0: one process)
TEST_JOBS ?= 2
test:  ## the quick suite: minutes, every module, the long tests left out (README: how long, which are long)
	WANDB_MODE=disabled $(PY) -m pytest -q -m "not slow" -n $(TEST_JOBS) $(ARGS)

test-full:  ## every test: trainings, wheel, browsers, SLURM, the fault suite, sweeps (what CI runs), TEST_JOBS workers
	WANDB_MODE=disabled $(PY) -m pytest -q -n $(TEST_JOBS) --durations=25 $(ARGS)

# the numeric tests that compare with fixtures or with numbers made on another machine (tests/fixtures/README.md):
# run again as a CPU without AVX-512 (avx2) and one without AVX at all (default) runs them, whatever this CPU has
ISA_TESTS ?= tests/test_search_harness.py tests/test_oracle.py tests/test_resume.py tests/test_captured_search.py \
	tests/test_bench_commit.py tests/test_docs_numbers.py tests/test_old_checkpoints.py tests/test_precision_cpu.py
test-isa:  ## the numeric tests under ATEN_CPU_CAPABILITY=avx2 (+ ONEDNN_MAX_CPU_ISA=AVX2) and =default (CI runs it)
	ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 WANDB_MODE=disabled $(PY) -m pytest -q -n $(TEST_JOBS) $(ISA_TESTS) $(ARGS)
	ATEN_CPU_CAPABILITY=default WANDB_MODE=disabled $(PY) -m pytest -q -n $(TEST_JOBS) $(ISA_TESTS) $(ARGS)

faults:  ## the fault suite: killed, preempted and diverged runs, full disks, hostile input to every command; a summary
	WANDB_MODE=disabled $(PY) -m pytest -q -m faults -p tests.fault_report

lint:  ## ruff: the rules, and the layout is the formatter's; import-linter: the package's floors (.importlinter)
	$(PY) -m ruff check sarnmt tests benchmarks
	$(PY) -m ruff format --check sarnmt tests benchmarks
	$(VENV)/bin/lint-imports

hooks:  ## pre-commit's local hooks on every file: ruff, import-linter, whitespace and file ends (those two fixed)
	$(PY) -m pre_commit run --all-files --show-diff-on-failure

# BUILD_FLAGS=--no-isolation builds with this venv's setuptools (offline); the default fetches it into a clean one
BUILD_FLAGS ?=

dist:  ## sdist and wheel into dist/ (python -m build), checked by twine check --strict (docs/install.md)
	rm -f dist/sarnmt-*.whl dist/sarnmt-*.tar.gz
	$(PY) -m build $(BUILD_FLAGS) --outdir dist/ .
	$(PY) -m twine check --strict dist/sarnmt-*.whl dist/sarnmt-*.tar.gz

.PHONY: dist

docs:  ## the documentation site into site/ (mkdocs build --strict: a broken link or a missing page fails; CI runs it)
	$(PY) -m mkdocs build --strict -d site/

docs-serve:  ## the site on http://127.0.0.1:8000, rebuilt as pages change (site/ also opens from disk: site/index.html)
	$(PY) -m mkdocs serve --strict -a 127.0.0.1:$(or $(PORT),8000)

docs-screenshots:  ## the pictures of the site opened from disk (docs/docs-offline-*.png), as its browser test sees it
	SARNMT_DOCS_SCREENSHOTS=docs WANDB_MODE=disabled $(PY) -m pytest -q tests/test_docs_browser.py

.PHONY: docs docs-serve docs-screenshots

train:  ## the main job: self-attentive residual decoder on the toy corpus
	$(PY) -m sarnmt train

params:  ## Table 1 parameter counts at paper size
	$(PY) -m sarnmt params model=paper decoder=all

# the checkout's bench peers (benchmarks/conf/peers/: the plain peer, the textbook model); `python -m` from here imports
# their modules (benchmarks/peers/, tests/oracle.py) from this folder. A folder of one's own goes into the same list:
# make bench BENCH_PEERS="hydra.searchpath=[file://$PWD/benchmarks/conf,file://DIR]" ARGS="decoders=[mine]"
BENCH_PEERS ?= hydra.searchpath=[file://$(CURDIR)/benchmarks/conf]

bench:  ## ~5 min: the six decoders at Multi30K lengths, each one's ratios to the plain peer (ARGS="device=cuda ...")
	$(PY) -m sarnmt bench $(BENCH_PEERS) $(ARGS)

bench-full:  ## ~30 min: both workloads, LSTM systems, plain + textbook peers, 5 repeats, plots (bench_preset=full)
	$(PY) -m sarnmt bench bench_preset=full $(BENCH_PEERS) $(ARGS)

# REF is required; both trees step with sarnmt's Adadelta of now, so the ratios compare the model and search code
bench-commit:  ## ~5 min: sarnmt now ÷ sarnmt at REF=<commit>, in one process on the same batches and weights
	@test -n "$(REF)" || { echo "error: make bench-commit needs REF=<commit> (e.g. REF=HEAD~1)" >&2; exit 2; }
	$(PY) -m sarnmt bench $(BENCH_PEERS) peers=commit peers.before.ref=$(REF) optim@reference_optim=adadelta $(ARGS)

gpu-wheels:  ## wheels of what an air-gapped GPU node lacks (hydra, omegaconf, ...) into .whl/ (PY_VERSION, PLATFORM)
	$(PY) benchmarks/gpu_check.py wheels --python-version $(PY_VERSION) $(addprefix --platform ,$(PLATFORM))

gpu-check:  ## ~9 min on one GPU: the GPU measure, gpu tests, bf16 bench, trainer=gpu (ARGS="--before HASH"|--dry-run)
	$(GPU_PY) benchmarks/gpu_check.py $(ARGS)

# the package at BEFORE, unpacked where gpu-check's measure step finds it without git: carry .cache/bench-commits/HASH
gpu-prepare:  ## BEFORE=<commit>: its package into .cache/bench-commits/ for gpu-check --before; prints the full hash
	@test -n "$(BEFORE)" || { echo "error: make gpu-prepare needs BEFORE=<commit> (e.g. BEFORE=HEAD~1)" >&2; exit 2; }
	@$(PY) -c "from benchmarks.peers.commit import materialize, resolve_commit as r; h = r('$(BEFORE)'); \
	materialize(h, '.cache/bench-commits'); print(h)"

peers:  ## sarnmt beside fairseq's LSTM and the plain loop: same batches, decoding sentences/s at equal output lengths
	@test -x outputs/peers/fairseq/bin/fairseq-train || benchmarks/peers/install_fairseq.sh outputs/peers/fairseq
	$(PY) benchmarks/peers/side_by_side.py $(ARGS)

# make peers-quality ARGS="--scale smoke --seeds 1" sees it work in minutes; a peer whose installer fails is "not run"
peers-quality:  ## hours: sarnmt's baseline beside JoeyNMT and fairseq to early stopping, 3 seeds: BLEU, time to BLEU
	@test -x outputs/peers/joeynmt/bin/python || benchmarks/peers/install_joeynmt.sh outputs/peers/joeynmt || true
	@test -x outputs/peers/fairseq/bin/fairseq-train || benchmarks/peers/install_fairseq.sh outputs/peers/fairseq || true
	WANDB_MODE=disabled $(PY) -m benchmarks.peers.quality run $(ARGS)

slurm-up:  ## a one-node SLURM cluster here (Debian, root) for launcher=slurm and the slurm tests: scripts/slurm-cluster.sh
	scripts/slurm-cluster.sh up

slurm-down:  ## stop the one-node SLURM cluster
	scripts/slurm-cluster.sh down

.PHONY: slurm-up slurm-down

reproduce-table1:  ## Table 1: make reproduce-table1 SCALE=smoke|mini|paper [ARGS="launcher=joblib|slurm logger=wandb ..."]
	$(PY) -m sarnmt reproduce table=1 scale=$(SCALE) $(ARGS)

reproduce-table2:  ## Table 2 (En-De, tokenised BLEU), same runs as Table 3
	$(PY) -m sarnmt reproduce table=2 scale=$(SCALE) $(ARGS)

reproduce-table3:  ## Table 3 (En-De, NIST BLEU on detokenised text)
	$(PY) -m sarnmt reproduce table=3 scale=$(SCALE) $(ARGS)

reproduce-table4:  ## Table 4 (content vs content+scope), its content row is Table 1's
	$(PY) -m sarnmt reproduce table=4 scale=$(SCALE) $(ARGS)

reproduce-table6:  ## Table 6 (language models: LSTM, attention, 4-gram, mean and self-attentive residual), perplexity
	$(PY) -m sarnmt reproduce table=6 scale=$(SCALE) $(ARGS)

reproduce-tables:  ## Tables 1-4 and 6, every run once
	$(PY) -m sarnmt reproduce table=all scale=$(SCALE) $(ARGS)

systems-m30k:  ## every system of the seeds on Multi30K En->De at docs/systems.md's budget (resumable; hours on a CPU)
	PY=$(PY) sweeps/systems/run.sh $(SYSTEMS)

tables:  ## render Tables 1-4 and 6 from the records: make tables SCALE=mini
	$(PY) -m sarnmt tables table=all scale=$(SCALE) $(ARGS)

human-eval-screenshot:  ## the picture of the ranking page (docs/human-eval.png), as the browser test renders it
	SARNMT_HUMAN_SCREENSHOT=docs/human-eval.png WANDB_MODE=disabled $(PY) -m pytest -q tests/test_human_browser.py

clean-logs:  ## remove training outputs
	rm -rf outputs multirun logs

.PHONY: help install browser test test-full test-isa faults lint hooks train params bench bench-full bench-commit gpu-wheels gpu-check gpu-prepare peers peers-quality \
	reproduce-table1 reproduce-table2 reproduce-table3 reproduce-table4 reproduce-table6 reproduce-tables systems-m30k tables human-eval-screenshot clean-logs
