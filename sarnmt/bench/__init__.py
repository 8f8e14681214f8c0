"""Speed benchmarks of sarnmt's model core against a plain reference implementation."""
