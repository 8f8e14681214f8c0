"""The kernels' rules by device: every trick sized for or paying only on a CPU is off on a GPU, read for
a CUDA device on a machine without one. On a GPU the search step runs no per-sentence Python loop: the energies'
chunk rule gives one piece, and under ``kernels=auto`` the chunked kernel is not even chosen."""

from __future__ import annotations

import pytest
import torch

from sarnmt.kernels import attention as attention_kernels
from sarnmt.kernels.attention import chunk_rows, scores_in_chunks
from sarnmt.kernels.choice import CPU_ONLY, Kernels
from sarnmt.kernels.output import CPU_CHUNK, block_rows
from sarnmt.models.hot_spots import EQUATIONS, kernel_choice

CUDA, CPU = torch.device("cuda"), torch.device("cpu")
# the gpu-check's beam workload at paper size: 256 sentences × 5 beams, 50 source positions, 2d = 2000, V = 50,000
PAPER = {"batch": 256, "beams": 5, "length": 50, "dim": 2000}


def test_every_cpu_only_kernel_is_off_on_a_gpu_under_auto():
    assert set(CPU_ONLY) <= set(Kernels.__dataclass_fields__)
    auto = kernel_choice("auto")
    for grad in (False, True):
        on_gpu, on_cpu = auto.rules(CUDA, grad), auto.rules(CPU, grad)
        assert not any(getattr(on_gpu, flag) for flag in CPU_ONLY)
        assert on_cpu.unrolled_encoder and on_cpu.sigmoid_tanh and on_cpu.chunked_attention == (not grad)
        assert on_gpu.gru_update and on_gpu.fused_output and on_gpu.loop_weights == grad  # the others stay
    search = auto._resolved[(True, False)]  # what a GPU's search step calls
    assert search.attention_scores is EQUATIONS.attention_scores and search.bigru is EQUATIONS.bigru
    assert auto.rules(torch.device("cuda:1")) == auto.rules(CUDA)
    assert not any(vars(kernel_choice("plain").rules(CUDA)).values())


def test_the_chunk_rules_give_one_piece_on_a_gpu():
    assert chunk_rows(CUDA, **PAPER) == PAPER["batch"]
    assert chunk_rows(CUDA, 1, 5, 50, 2000) == 1
    assert chunk_rows(CPU, **PAPER) == 1  # one sentence per piece on a CPU at paper size: its cache's rule
    assert chunk_rows(CPU, 3, 1, 4, 8) == 3  # a small batch fits at once
    assert block_rows(CUDA, 12_800, 50_000) == 12_800
    assert block_rows(CPU, 12_800, 50_000) == CPU_CHUNK // 50_000


@pytest.mark.parametrize(("device", "pieces"), [("meta", 1), ("cpu", 4)])
def test_scores_in_chunks_loops_once_off_the_cpu(monkeypatch, device, pieces):
    """``kernels=fused`` keeps the chunked kernel on a GPU: there it forms the energies as one piece (counted on the
    meta device, which is not a CPU either); on a CPU with a buffer of one sentence, a piece per sentence."""
    calls = []
    tanh_ = attention_kernels.tanh_
    monkeypatch.setattr(attention_kernels, "tanh_", lambda x, by_sigmoid: calls.append(x.size(0)) or tanh_(x, False))
    monkeypatch.setattr(attention_kernels, "CACHE_CHUNK", 5 * 7 * 6)  # one sentence's energies
    keys, query = torch.randn(4, 7, 6, device=device), torch.randn(4, 5, 1, 6, device=device)
    v, bias = torch.randn(6, device=device), torch.full((), 0.5, device=device)
    scores = scores_in_chunks(keys, query, v, bias, False)
    assert scores.shape == (4, 5, 7) and len(calls) == pieces
    if device == "cpu":
        torch.testing.assert_close(scores, torch.matmul(torch.tanh(keys.unsqueeze(1) + query), v) + bias)
