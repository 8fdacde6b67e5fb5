"""Reads a job directory of `reeval harbor run -o` with Harbor 0.26's own
models, as its tools read one: the job's config, result and lock, each
trial's config, result, lock and ATIF trajectory, `harbor view`'s folder
scanner and its indexed folder source (which needs every trial's lock).
Each trial lock's task digest is compared with Harbor's own content hash of
the task. Any file Harbor cannot read raises. Prints what it read, as JSON.

    python harbor_check_job.py JOBS_DIR JOB_NAME
"""

import asyncio
import json
import sys
from pathlib import Path

from harbor.models.job.config import JobConfig
from harbor.models.job.lock import JobLock, TrialLock
from harbor.publisher.packager import Packager
from harbor.models.job.result import JobResult
from harbor.models.trajectories.trajectory import Trajectory
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.viewer.scanner import JobScanner
from harbor.viewer.sources.folder import FolderSource

jobs_dir, job_name = Path(sys.argv[1]), sys.argv[2]
job = jobs_dir / job_name
config = JobConfig.model_validate_json((job / "config.json").read_text())
result = JobResult.model_validate_json((job / "result.json").read_text())
job_lock = JobLock.model_validate_json((job / "lock.json").read_text())
assert (job / "job.log").is_file(), "job.log"
out = {
    "n_total_trials": result.n_total_trials,
    "n_errored_trials": result.stats.n_errored_trials,
    "n_retries": result.stats.n_retries,
    "agents": [a.name for a in config.agents],
    "evals": {
        key: {
            "metrics": stats.metrics,
            "n_trials": stats.n_trials,
            "n_errors": stats.n_errors,
            "exceptions": sorted(stats.exception_stats),
        }
        for key, stats in result.stats.evals.items()
    },
    "trials": {},
    "lock_trials": len(job_lock.trials),
}
for trial in sorted(d for d in job.iterdir() if d.is_dir()):
    TrialConfig.model_validate_json((trial / "config.json").read_text())
    r = TrialResult.model_validate_json((trial / "result.json").read_text())
    lock = TrialLock.model_validate_json((trial / "lock.json").read_text())
    assert lock in job_lock.trials, f"{trial.name}: the job's lock lists the trial's"
    if lock.task.type == "local":
        harbors, _ = Packager.compute_content_hash(lock.task.path)
        assert lock.task.digest == f"sha256:{harbors}", (trial.name, lock.task.digest, harbors)
    trajectory = trial / "agent" / "trajectory.json"
    steps = None
    if trajectory.is_file():
        steps = len(Trajectory.model_validate_json(trajectory.read_text()).steps)
    out["trials"][trial.name] = {
        "task_name": r.task_name,
        "source": r.source,
        "rewards": r.verifier_result.rewards if r.verifier_result else None,
        "reward_valid": r.reward_valid,
        "exception": r.exception_info.exception_type if r.exception_info else None,
        "agent": r.agent_info.name,
        "trajectory_steps": steps,
        "files": sorted(
            str(p.relative_to(trial)) for p in trial.rglob("*") if p.is_file()
        ),
    }

# What `harbor view` reads of a jobs folder: it gives None for a file it cannot parse.
scanner = JobScanner(jobs_dir)
assert job_name in scanner.list_jobs(), scanner.list_jobs()
assert scanner.get_job_config(job_name) is not None, "harbor view cannot read config.json"
assert scanner.get_job_result(job_name) is not None, "harbor view cannot read result.json"
for name in scanner.list_trials(job_name):
    assert scanner.get_trial_config(job_name, name) is not None, name
    assert scanner.get_trial_result(job_name, name) is not None, name
out["viewer_trials"] = len(scanner.list_trials(job_name))

# `harbor view`'s indexed read of a folder: it refuses a trial without a lock.json.
async def view():
    source = FolderSource(jobs_dir)
    try:
        jobs = await source.read("jobs", {})
        rollouts = await source.read("rollouts", {})
        return len(jobs["items"]), len(rollouts["items"])
    finally:
        await source.close()


out["indexed_jobs"], out["indexed_trials"] = asyncio.run(view())
print(json.dumps(out, indent=1, default=str))
