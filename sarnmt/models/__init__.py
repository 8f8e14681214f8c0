"""The model core: a plain ``nn.Module`` sequence-to-sequence network usable without Lightning."""
