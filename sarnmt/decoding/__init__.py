"""Search over :meth:`sarnmt.models.seq2seq.Seq2Seq.step`: greedy (:mod:`.greedy`) and batched beam search
(:mod:`.beam`: the one loop), both behind the :class:`~sarnmt.decoding.search.Search` interface that
``sarnmt/conf/decoding/*.yaml`` instantiate; the search rule (candidates, finished hypotheses, pruning) in
:mod:`.rule`; length penalty and maximum-length rule in :mod:`.penalties`; streaming over many sentences in
:mod:`.stream`; a corpus split translated and scored in :mod:`.split_translation`; ``translate``'s attention file,
written and read, in :mod:`.attention_file`."""
