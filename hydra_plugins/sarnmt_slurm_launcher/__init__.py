"""sarnmt's SLURM launcher for the table sweeps, where Hydra looks for launchers (the ``hydra_plugins`` namespace, and
the module that defines the class): ``_target_: hydra_plugins.sarnmt_slurm_launcher.SweepSlurmLauncher``
(``sarnmt/conf/hydra/launcher/slurm*.yaml``). The code is :mod:`sarnmt.sweep.slurm`; without hydra-submitit-launcher
(the ``slurm`` extra) this defines nothing, so that Hydra's plugin scan stays quiet."""

try:
    from sarnmt.sweep import slurm as _slurm
except ImportError:  # no hydra-submitit-launcher / submitit: launcher=slurm says so before any job
    pass
else:

    class SweepSlurmLauncher(_slurm.SweepSlurmLauncher):
        """:class:`sarnmt.sweep.slurm.SweepSlurmLauncher`, defined here so that Hydra finds it."""
