"""Word-level recurrent language models (Table 6 of the paper, after Daniluk et al. 2017): one LSTM model
(:mod:`.model`) and its output layers (:mod:`.heads`, :mod:`.daniluk`)."""
