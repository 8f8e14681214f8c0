"""The table sweeps on SLURM (``launcher=slurm``): the launcher, and the checks ``reproduce`` makes before any job.

:class:`SweepSlurmLauncher` is hydra-submitit-launcher's ``SlurmLauncher`` (profiles:
``sarnmt/conf/hydra/launcher/slurm.yaml``, GPUs, one task per GPU; ``slurm_cpu.yaml``, CPUs only) with what a sweep
needs:

- one ``sbatch`` per job, named after its cell, so that ``squeue`` and ``sacct`` say which cell is which (submitit's
  own ``map_array`` makes one array whose tasks all have one name);
- ``export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}`` in every job script, before Python starts (then the job's
  ``setup`` lines, which may set it otherwise);
- a request SLURM refuses stops the sweep at once with ``sbatch``'s message (the jobs already submitted keep running);
- every job is waited for, ``sacct`` asked for all of them at once every few seconds (at most every 30 s); the jobs
  that end without a result (cancelled, killed, out of memory, node lost, requeued more than ``max_num_timeout``
  times) or with an error are reported together, each by cell, SLURM job id, state and log, and the multirun exits
  with status :data:`JOBS_FAILED`; ``reproduce`` then lists the cells without a record, and running it again resumes
  or reruns them. A job that did not finish writes no record.

Preemption and time limits: SLURM sends the job ``--signal`` (SIGUSR2, ``signal_delay_s`` before its end, or at
preemption with ``SlurmctldParameters=preempt_send_user_signal``); the run checkpoints after the update in progress
(:mod:`sarnmt.training.preemption`) and submitit requeues it; ``scontrol requeue`` sends SIGTERM, which checkpoints the
same way. The requeued job resumes from its ``last.ckpt``. submitit counts a requeue against ``max_num_timeout`` when
the signal comes in the last 20% of the time limit (the last 10 minutes of limits under 50 minutes: every signal, for
limits of 10 minutes or less); earlier ones, which it takes for preemptions, do not count.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

from sarnmt.errors import UserError

log = logging.getLogger("sarnmt")
THREADS = "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}"
JOBS_FAILED = 3  # the multirun's exit status when jobs ended without a result
SUBMISSION_REFUSED = 2


def cell_of(overrides: list[str]) -> str | None:
    """The cell id (``job=<id>``) among a sweep job's overrides."""
    return next((o.split("=", 1)[1] for o in overrides if o.startswith("job=")), None)


def make_executor(params: dict[str, Any]):
    """submitit's executor with the launcher's parameters, as hydra-submitit-launcher makes it, the thread count
    first among the setup lines."""
    import submitit

    params = dict(params)
    params.pop("_target_", None)
    executor = submitit.AutoExecutor(
        cluster="slurm", folder=params.pop("submitit_folder"), slurm_max_num_timeout=params.pop("max_num_timeout", 0)
    )
    params["setup"] = [THREADS, *(params.get("setup") or [])]
    generic = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in generic else f"slurm_{k}": v for k, v in params.items()})
    return executor


class SweepSlurmLauncher(SlurmLauncher):
    """See the module docstring."""

    def launch(self, job_overrides, initial_job_idx: int) -> list[JobReturn]:
        assert self.config is not None
        executor = make_executor(self.params)
        log.info("Submitit 'slurm' sweep output dir : %s", self.config.hydra.sweep.dir)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        jobs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            name = cell_of(list(overrides)) or f"{self.params.get('name', 'sweep_job')}-{idx}"
            executor.update_parameters(name=name)
            arguments = (list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
            try:
                job = executor.submit(self, *arguments)
            except Exception as err:  # submitit's FailedJobError holds sbatch's message
                message = " ".join(str(err).split()) or type(err).__name__
                submitted = ", ".join(f"{n} ({j.job_id})" for n, j in jobs)
                print(
                    f"error: SLURM refused job {name}: {message}"
                    + (f"; the jobs already submitted keep running: {submitted}" if jobs else ""),
                    file=sys.stderr,
                    flush=True,
                )
                raise SystemExit(SUBMISSION_REFUSED) from None
            log.info("\t#%d : %s : SLURM job %s : %s", idx, name, job.job_id, " ".join(filter_overrides(overrides)))
            jobs.append((name, job))
        return wait_for(jobs)


def wait_for(jobs: list) -> list[JobReturn]:
    """Wait for every ``(cell, submitit job)``; report those without a result and exit, or return the results."""
    from submitit.slurm.slurm import SlurmJob

    start, pending = time.monotonic(), list(jobs)
    while pending:
        SlurmJob.watcher.update()  # one sacct for every unfinished job
        pending = [(name, job) for name, job in pending if not job.done()]
        if pending:
            time.sleep(min(30.0, 2.0 + (time.monotonic() - start) / 20))
    results, failed = [], []
    for name, job in jobs:
        try:
            result = job.results()[0]
        except Exception as err:  # noqa: BLE001 - submitit's UncompletedJobError, FailedJobError: reported below
            failed.append(f"{name}: SLURM job {job.job_id}, {job.state}{_why(job, err)}; log {job.paths.stdout}")
            continue
        if isinstance(result, JobReturn) and result.status == JobStatus.FAILED:
            error = result._return_value
            failed.append(f"{name}: SLURM job {job.job_id}: {type(error).__name__}: {error}; log {job.paths.stdout}")
        results.append(result)
    if failed:
        print(
            f"{len(failed)} of {len(jobs)} SLURM jobs ended without a result:\n  " + "\n  ".join(failed),
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(JOBS_FAILED)
    return results


ERROR_LINE = re.compile(r"^(error|stopped): |^\w+(Error|Exception): |^slurmstepd.*: error: ")


def _why(job, err: BaseException) -> str:
    """The job's last error line (``error: ...`` from sarnmt, an exception, SLURM's), else submitit's message."""
    try:
        lines = job.paths.stderr.read_text(errors="replace").splitlines()[-200:]
    except OSError:
        lines = []
    found = [line.strip() for line in lines if ERROR_LINE.search(line.strip())]
    if found:
        return f": {found[-1]}"
    message = " ".join(str(err).split())
    return "" if "has not produced any output" in message else f": {message[:300]}"


# --- before any job ------------------------------------------------------------------------------------------------
def check_slurm(params: dict[str, Any]) -> str:
    """That SLURM is here and would take the sweep's jobs: ``sbatch --test-only`` of a job script with the launcher's
    request (``params``: the ``hydra.launcher`` settings). :returns: sbatch's answer (when and where it would start).

    :raises SlurmUnavailable: no ``sbatch`` on PATH, or SLURM refuses the request (its message)."""
    if shutil.which("sbatch") is None:
        raise SlurmUnavailable(
            "launcher=slurm: sbatch was not found on PATH (SLURM's client commands); run on a cluster's login node, "
            "or start a one-node cluster here with scripts/slurm-cluster.sh up"
        )
    with tempfile.TemporaryDirectory(prefix="sarnmt-slurm-") as folder:
        executor = make_executor({**params, "submitit_folder": folder})
        executor.update_parameters(name="sarnmt-request-check")
        script = Path(folder) / "check.sh"
        script.write_text(executor._executor._make_submission_file_text("true", "check"))
        try:
            done = subprocess.run(
                ["sbatch", "--test-only", str(script)], capture_output=True, text=True, timeout=60, cwd=folder
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable("launcher=slurm: sbatch --test-only did not answer within 60 s") from None
    answer = " ".join((done.stderr + done.stdout).split())
    if done.returncode != 0:
        raise SlurmUnavailable(f"SLURM refuses the jobs' request ({describe_request(params)}): {answer}")
    return answer


def describe_request(params: dict[str, Any]) -> str:
    keys = ("partition", "account", "qos", "nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "mem_gb")
    parts = [f"{k}={params[k]}" for k in keys if params.get(k) is not None]
    return ", ".join([*parts, f"timeout_min={params.get('timeout_min')}"])


class SlurmUnavailable(UserError, RuntimeError):
    """SLURM is not installed here, or refuses the request; the message says which and what to do."""
