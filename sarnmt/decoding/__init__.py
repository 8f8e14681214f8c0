"""Search over :meth:`sarnmt.models.seq2seq.Seq2Seq.step`: greedy now, batched beam search later."""
