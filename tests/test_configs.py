"""Every option of every config group composes and instantiates; bad choices and keys fail with Hydra's error."""

from __future__ import annotations

import io

import pytest
import torch
from hydra.errors import ConfigCompositionException, InstantiationException, MissingConfigException
from hydra.utils import instantiate
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from sarnmt.models.factory import ModelConfigError, build_model
from sarnmt.training.run import train
from sarnmt.utils.instantiate import instantiate_dict
from tests.conftest import CONF_DIR, compose_train

GROUPS = [
    "data",
    "model",
    "decoder",
    "optim",
    "decoding",
    "val_decoding",
    "trainer",
    "callbacks",
    "validation",
    "logger",
    "debug",
]
OPTIONS = [(group, path.stem) for group in GROUPS for path in sorted((CONF_DIR / group).glob("*.yaml"))]


def _tiny_files(tmp_path) -> list[str]:
    overrides = []
    for split in ("train", "dev", "test"):
        for side, text in (("src", "a b c\nd e\n"), ("tgt", "x y\nz\n")):
            path = tmp_path / f"{split}.{side}"
            path.write_text(text, encoding="utf-8")
            overrides.append(f"data.{split}_{side}={path}")
    return overrides


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_option_composes_and_instantiates(group, option, tmp_path, monkeypatch):
    overrides = [f"{group}={option}"]
    if (group, option) == ("decoder", "none"):  # the one decoder of the input-feeding LSTM, and of no other model
        overrides.append("model=lstm_input_feeding_tiny")
    if option == "slurm":  # as inside task 1 of a 2-task SLURM job: Lightning takes ranks from SLURM's variables
        slurm = {
            "SLURM_NTASKS": "2",
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_PROCID": "1",
            "SLURM_LOCALID": "1",
            "SLURM_NODELIST": "node1",
            "SLURM_JOB_ID": "7",
            "SLURM_JOB_NAME": "sweep_job",
        }
        for key, value in slurm.items():
            monkeypatch.setenv(key, value)
        # the Trainer sets the process-wide rank_zero_only.rank to its rank (1): put 0 back after the test
        monkeypatch.setattr(rank_zero_only, "rank", getattr(rank_zero_only, "rank", 0))
    if option == "files":
        overrides += _tiny_files(tmp_path)
    cfg = compose_train(overrides, output_dir=tmp_path)
    if group == "data":
        datamodule = instantiate(cfg.data)
        buffer = io.BytesIO()  # Lightning stores these in every checkpoint, which must load with weights_only
        torch.save({"datamodule_hyper_parameters": dict(datamodule.hparams)}, buffer)
        torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
        if "corpus" in cfg.data:  # a described corpus is fetched and prepared first: see tests/test_prepare.py
            assert datamodule.corpus.name == option
            return
        datamodule.setup("fit")
        assert datamodule.src_vocab_size > 2 and datamodule.tgt_vocab_size > 2
    elif group in ("model", "decoder"):
        with torch.device("meta"):  # the paper-size models are built without allocating their weights
            assert sum(p.numel() for p in build_model(cfg.model, cfg.decoder, 30, 40).parameters()) > 0
        net = build_model({**cfg.model, "emb_dim": 8, "hidden_dim": 8}, cfg.decoder, 30, 40)
        memory, state = net.encode(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool))
        assert net.step(None, state, memory).logits.shape == (2, 40)
    elif group == "val_decoding":
        assert instantiate(cfg.val_decoding).settings()["search"] == option
    elif group == "optim":
        optimizer = instantiate(cfg.optim)(params=[torch.nn.Parameter(torch.zeros(2))])
        assert isinstance(optimizer, torch.optim.Optimizer)
    elif group == "decoding":
        assert cfg.decoding.max_len_a > 0 and instantiate(cfg.decoding).min_len == 0
    elif group in ("callbacks", "logger"):
        built = instantiate_dict(cfg[group])
        assert len(built) == len([v for v in cfg[group].values() if v is not None])
    elif group == "validation":
        monitor = {"bleu": ("val/bleu", "max"), "cost": ("val/loss", "min"), "ppl": ("val/ppl", "min")}[option]
        for callback in ("model_checkpoint", "early_stopping"):
            assert (cfg.callbacks[callback].monitor, cfg.callbacks[callback].mode) == monitor
        assert (cfg.trainer.val_check_interval is None) == (option in ("bleu", "ppl"))
    if group in ("trainer", "debug"):
        trainer_cfg = cfg.trainer
        if trainer_cfg.accelerator == "gpu" and not torch.cuda.is_available():
            trainer_cfg.accelerator, trainer_cfg.devices = "cpu", 2 if trainer_cfg.get("strategy") else 1
        trainer = instantiate(trainer_cfg, logger=False, callbacks=[])
        assert trainer.max_epochs is not None
        if option == "slurm":
            assert (trainer.num_devices, trainer.global_rank, trainer.world_size) == (2, 1, 2)


def test_unknown_decoder_names_the_choices():
    with pytest.raises(MissingConfigException) as err:
        compose_train(["decoder=no_such_decoder"])
    message = str(err.value)
    assert "no_such_decoder" in message
    for name in ("baseline", "self_attentive_content", "memory_rnn"):
        assert name in message


def test_unknown_key_is_rejected():
    with pytest.raises(ConfigCompositionException, match="decoder.scorre"):
        compose_train(["decoder.scorre=content"])


def _build(cfg):
    return build_model(cfg.model, cfg.decoder, 10, 10)


@pytest.mark.parametrize(
    ("model", "decoder", "valid"),
    [
        ("lstm_input_feeding_tiny", "baseline", "none"),
        (
            "tiny",
            "none",
            "baseline, mean_residual, memory_rnn, self_attentive_content, self_attentive_content_scope, "
            "self_attentive_rnn",
        ),
        (
            "lstm_ff_attention_tiny",
            "memory_rnn",
            "baseline, mean_residual, self_attentive_content, self_attentive_content_scope, self_attentive_rnn",
        ),
    ],
)
def test_invalid_model_decoder_pair_names_the_valid_ones_before_reading_data(model, decoder, valid, tmp_path):
    missing = tmp_path / "absent.txt"  # data that does not exist: the pair is refused before it is looked for
    cfg = compose_train(
        [f"model={model}", f"decoder={decoder}", "data=files", f"data.train_src={missing}"], output_dir=tmp_path
    )
    with pytest.raises(ModelConfigError, match=f"valid decoder= options for this model: {valid}$"):
        train(cfg)


def test_each_lstm_model_defaults_to_its_own_decoder():
    assert compose_train(["model=lstm_fixed_context_tiny"]).decoder._target_.endswith("Baseline")
    assert compose_train(["model=lstm_ff_attention"]).decoder._target_.endswith("Baseline")
    assert compose_train(["model=lstm_input_feeding_small"]).decoder._target_.endswith("NoTargetContext")
    assert compose_train(["model=lstm_ff_attention", "decoder=mean_residual"]).decoder._target_.endswith("Residual")
    assert compose_train([]).decoder.scorer == "content"  # the cGRU keeps the paper's proposed decoder


def test_typo_in_a_constructor_argument_fails_when_the_model_is_built():
    cfg = compose_train(["decoder=self_attentive_content", "+decoder.scorer_typo=1", "model=tiny"])
    with pytest.raises(InstantiationException, match="scorer_typo"):
        _build(cfg)


def test_bad_switch_value_is_rejected():
    cfg = compose_train(["decoder=memory_rnn", "decoder.form=appendx", "model=tiny"])
    with pytest.raises(InstantiationException, match="appendx"):
        _build(cfg)
