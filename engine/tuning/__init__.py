"""Whole-model tuning (issue 14 item 2): the model's distinct tasks, each tuned once by local
moves and applied to every occurrence, the measurement budget spent where the end-to-end
time falls most (Ansor's gradient task scheduler), records per task in the database.

    res = tune(p, runner, budget_s=120, db=db)   # res.schedule: the tuned whole-model schedule
"""

from __future__ import annotations

from .scheduler import GradientScheduler, TaskState
from .tasks import Occurrence, Task, apply_tasks, extract_tasks
from .tune import TaskResult, TuneProgress, TuneResult, keep_faster, measure_end_to_end, tune

__all__ = [
    "GradientScheduler", "Occurrence", "Task", "TaskResult", "TaskState", "TuneProgress", "TuneResult",
    "apply_tasks", "extract_tasks", "keep_faster", "measure_end_to_end", "tune",
]  # fmt: skip
