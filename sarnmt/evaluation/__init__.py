"""Scoring system outputs: sacrebleu BLEU/chrF with signatures (:mod:`.bleu`) and significance tests against a
baseline (:mod:`.significance`)."""
