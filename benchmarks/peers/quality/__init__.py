"""sarnmt's baseline beside JoeyNMT 2.3.0 and fairseq 0.12's LSTM on Multi30K En->De: BLEU and time to BLEU
(``make peers-quality``, docs/peers-quality.md).

- :mod:`~benchmarks.peers.quality.data`: the text every system trains on, exported from sarnmt's own pipeline;
- :mod:`~benchmarks.peers.quality.systems`: each system's config, commands and log reading;
- :mod:`~benchmarks.peers.quality.runner`: one job (train, resume, decode, score, record);
- :mod:`~benchmarks.peers.quality.speed`: beam-5 translation timed one system at a time;
- :mod:`~benchmarks.peers.quality.scoring`: every output scored the way sarnmt's tables score;
- :mod:`~benchmarks.peers.quality.breakdown`: time to the selected checkpoint as updates × CPU per update;
- :mod:`~benchmarks.peers.quality.render`: table, seed-aware tests, figure;
- :mod:`~benchmarks.peers.quality.cli`: the command (``python -m benchmarks.peers.quality``).
"""
