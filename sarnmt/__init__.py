"""sarnmt: self-attentive residual decoders for recurrent NMT."""

from sarnmt.utils.allocation import register_resolvers, set_thread_count

__version__ = "0.1.0"  # the one place the version is set: pyproject.toml reads it, CHANGELOG.md records it

set_thread_count()  # inside a SLURM job: OMP_NUM_THREADS from the allocation, before torch is imported
register_resolvers()  # ${sarnmt.allocation:...}, which trainer=slurm follows
