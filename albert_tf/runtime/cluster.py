"""Who is chief: the one rule, for a process reading its TF_CONFIG before TensorFlow starts (the output lock) and
for a made strategy (checkpoints, summaries, the model dir's files). No TensorFlow here.

The chief is the task of type "chief" when the cluster has one, else worker 0 (TensorFlow's multi-worker
convention); a process with no cluster (one machine, a TPU client) is its own chief.
"""
import json
import os


def is_chief_task(task_type, task_id, cluster_has_chief):
    """The rule: True for the "chief" task, or for worker 0 of a cluster without one; no task type is True."""
    if not task_type or task_type == "chief":
        return True
    return task_type == "worker" and int(task_id or 0) == 0 and not cluster_has_chief


def is_chief_from_env(environ=None):
    """`is_chief_task` for this process's TF_CONFIG (environ: os.environ when None); True without one."""
    raw = (environ if environ is not None else os.environ).get("TF_CONFIG")
    if not raw:
        return True
    try:
        cfg = json.loads(raw)
    except ValueError:
        return True
    task = cfg.get("task") or {}
    return is_chief_task(task.get("type"), task.get("index", 0), "chief" in (cfg.get("cluster") or {}))


def is_chief_of_resolver(resolver):
    """`is_chief_task` for a strategy's cluster resolver (None, or one without a task type: True)."""
    task_type = getattr(resolver, "task_type", None) if resolver is not None else None
    if not task_type:
        return True
    try:
        has_chief = "chief" in resolver.cluster_spec().as_dict()
    except (AttributeError, ValueError):
        has_chief = False
    return is_chief_task(task_type, getattr(resolver, "task_id", 0), has_chief)
