"""Shared fixtures: the real Hydra configs, composed and shrunk for tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig, open_dict

from sarnmt.models.factory import valid_decoders
from sarnmt.utils.compose import config_dir

os.environ.setdefault("WANDB_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = config_dir()  # sarnmt/conf, the packaged configs
SHARED_DATA = ROOT.parent / "shared" / "data"
# the alternative forms of a decoder's switches
FORMS = {
    "memory_rnn": ["decoder.form=appendix"],
    "self_attentive_rnn": ["decoder.form=appendix"],
    "mean_residual": ["decoder.first_step=paper"],
}
# the model classes, by the model= options that name them (their sizes come from the tests)
MODELS = {
    "cgru": "sarnmt.models.seq2seq.Seq2Seq",
    "lstm_fixed_context": "sarnmt.models.lstm.FixedContextLSTM",
    "lstm_ff_attention": "sarnmt.models.lstm.AttentionLSTM",
    "lstm_input_feeding": "sarnmt.models.lstm.InputFeedingLSTM",
}
# the paper's cGRU decoders and every form of their switches
DECODERS = valid_decoders(get_class(MODELS["cgru"]))
DECODER_FORMS = [(name, override) for name in DECODERS for override in [None, *FORMS.get(name, [])]]
# every valid (model, decoder, switch) combination: the invariant tests run on each
SYSTEMS = [
    (model, name, override)
    for model, target in MODELS.items()
    for name in valid_decoders(get_class(target))
    for override in [None, *FORMS.get(name, [])]
]
SYSTEM_IDS = [f"{m}:{n}{'+' + o.split('=')[1] if o else ''}" for m, n, o in SYSTEMS]


def compose_train(overrides: list[str], output_dir: Path | None = None) -> DictConfig:
    """Compose ``sarnmt/conf/train.yaml`` as the command line would, with outputs in ``output_dir``."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides, return_hydra_config=False)
    if output_dir is not None:
        with open_dict(cfg):
            cfg.paths.output_dir = str(output_dir)
    return cfg


def decoder_cfg(name: str, override: str | None = None) -> DictConfig:
    """The ``decoder`` node of a composed config."""
    return compose_train([f"decoder={name}"] + ([override] if override else [])).decoder


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (the same reduction order in every product), its thread count back after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA


# suites that are long by nature and run in `make test-full` only, as if each of their tests were marked slow: the
# fault suite (`make faults`), the SLURM cluster's and the GPU's (`make gpu-check`)
FULL_ONLY = ("faults", "slurm", "gpu")
# the other long tests, marked slow here in one table (module: why, or module: {test: why}) so that `make test`
# stays within minutes (README: which command runs what, and how long each takes); a test's parameters share its mark
SLOW = {
    "test_wheel.py": "builds the wheel and installs it into a fresh environment",
    "test_human_browser.py": "drives chromium",
    "test_human_walkthrough.py": "trains two toy models, translates with both, then ranks through the page's API",
    "test_docs_browser.py": "builds the documentation site and drives chromium",
    "test_analysis_commands.py": "trains two models, then runs every analysis on them",
    "test_overfit.py": "trains every system until it has learnt 16 pairs",
    "test_bench_commit.py": "checks out and imports another commit, then benches it",
    "test_bench.py": {
        "test_bench_measures_every_figure_on_every_workload_and_plots": "times every figure on every workload",
        "test_bench_command_writes_json_markdown_and_reports_errors": "runs the bench command",
    },
    "test_curves.py": {
        "test_train_leaves_curves_with_the_selected_checkpoint_marked": "trains with validation",
        "test_curves_command_draws_several_runs_in_one_figure": "trains with validation",
        "test_curves_command_bad_input_is_one_error_line": "trains with validation",
    },
    "test_data_layout.py": {"test_every_module_imports_alone_in_a_fresh_interpreter": "a fresh interpreter a module"},
    "test_calibration.py": {
        "test_the_synthetic_regimes_hold_the_band_and_the_old_bootstrap_does_not": "simulates 1,000 cells x 9",
    },
    "test_entrypoints.py": {
        "test_multirun_gives_one_wandb_run_per_job": "two trainings with W&B",
        "test_params_table": "the params command as a process (tests/test_cli.py runs it in the quick suite)",
        "test_a_group_option_or_key_the_config_lacks_is_one_error_line_in_every_hydra_command": "three processes",
        "test_train_and_params_refuse_a_pair_that_does_not_go_together_in_one_line": "three processes",
    },
    "test_gpu_check.py": {"test_dry_run_writes_every_record": "every step of make gpu-check, on the CPU"},
    "test_gpu_measure.py": {"test_the_dry_run_records_now_before_and_the_code": "gpu_measure.py now and before, CPU"},
    "test_lm_models.py": {"test_overfits_a_small_text": "trains every head to convergence"},
    "test_new_variant.py": {"test_a_new_variant_trains_translates_and_is_benched": "trains, translates and benches"},
    "test_peers.py": {"test_driver_trains_and_decodes_on_the_same_batches": "trains and decodes twice"},
    "test_peers_quality.py": {
        "test_the_exported_text_is_sarnmts_mini_text": "exports Multi30K through sarnmt's pipeline",
        "test_an_installer_that_cannot_install_says_so_in_one_line": "makes a venv per installer",
    },
    "test_resume.py": {"test_mid_epoch_resume_trains_as_the_uninterrupted_run": "trains three times"},
    "test_slurm_launcher.py": {
        "test_two_sweeps_at_once_one_runs_each_job_the_other_reports_the_cells_it_skipped": "two smoke sweeps",
    },
    "test_sweep.py": {
        name: "a smoke sweep"
        for name in (
            "test_smoke_sweep_writes_records_tables_and_skips_finished_jobs",
            "test_broken_and_stale_records_are_reported_never_averaged",
            "test_records_of_other_code_run_again_where_their_cell_would_be_mixed",
            "test_sigkill_mid_job_then_rerun_resumes_and_equals_the_uninterrupted_sweep",
            "test_table1_from_the_released_outputs_gives_the_papers_numbers",
            "test_multirun_of_ddp_sim_jobs_runs_each_job_once",
            "test_missing_corpus_fails_before_any_job",
            "test_wandb_offline_run_per_job_with_group_tags_and_scores",
            "test_rendered_table_logged_as_a_wandb_table_in_a_summary_run",
            "test_concurrent_preparation_of_one_corpus_builds_it_once",
        )
    },
    "test_table6.py": {
        name: "trains language models"
        for name in (
            "test_smoke_table6_records_perplexity_over_every_test_word",
            "test_checkpoints_of_the_other_task_are_refused_in_one_line",
            "test_lightning_perplexity_is_exp_of_the_mean_nll_over_the_split",
            "test_resumed_language_model_trains_exactly_as_the_uninterrupted_one",
            "test_lm_entry_point_prints_the_test_perplexity",
            "test_bench_lm_times_every_row_in_one_run",
        )
    },
    "test_table_significance.py": {
        name: "10,000 bootstrap resamples of several tables"
        for name in (
            "test_pinned_cells_show_the_seed_aware_markers_intervals_and_a_footer_that_names_the_test",
            "test_a_cell_of_two_commits_is_mixed_code_and_not_averaged",
            "test_the_tables_command_counts_a_nan_record_and_refuses_too_few_resamples_in_one_line",
            "test_baseline_compares_every_row_with_another_row_in_files_of_their_own",
            "test_a_recorded_score_within_a_hundredth_of_its_statistics_is_counted",
            "test_a_run_of_another_precision_is_refused_in_one_line_naming_both",
            "test_the_superseded_mini8_tables_render_as_published",
        )
    },
    "test_train.py": {
        name: "trains, several processes or several runs"
        for name in (
            "test_ddp_sim_two_processes",
            "test_files_multi30k_trains_and_validates",
            "test_train_checkpoints_and_resume",
            "test_average_last_checkpoints_at_the_end",
        )
    },
}


def is_slow(item: pytest.Item) -> bool:
    """Whether ``item`` runs in `make test-full` only (:data:`FULL_ONLY`, :data:`SLOW`)."""
    if any(item.get_closest_marker(name) for name in FULL_ONLY):
        return True
    entry = SLOW.get(item.path.name)
    return isinstance(entry, str) or (isinstance(entry, dict) and item.originalname in entry)


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
