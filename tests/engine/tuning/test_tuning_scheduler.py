"""The task scheduler's allocation on fakes with known gains (no measuring)."""

from engine.tuning import GradientScheduler, TaskState


def run(scheduler: GradientScheduler, curves: list[list[float]], costs: list[float], trials: int) -> list[int]:
    """Give `trials` trials as the scheduler says; task i's k-th trial measures curves[i][k]
    (its last value once the curve ends) and costs costs[i] seconds."""
    for _ in range(trials):
        i = scheduler.next()
        assert i is not None
        k = scheduler.tasks[i].trials
        scheduler.tasks[i].add(curves[i][min(k, len(curves[i]) - 1)], costs[i])
    return [t.trials for t in scheduler.tasks]


def test_the_budget_goes_where_end_to_end_time_falls():
    # A: 10 occurrences, 10 ms falling 0.2 ms per trial; B: once, 10 ms, never better; C: once, 1 ms, falling.
    # B keeps an optimistic share (its forward estimate decays as best/trials) until A's steady
    # gain x 10 occurrences outweighs it: a handful of trials.
    tasks = [TaskState(10, 1e6, "conv"), TaskState(1, 1e6, "pool"), TaskState(1, 1e5, "add")]
    curves = [[10 - 0.2 * k for k in range(45)], [10.0], [1 - 0.04 * k for k in range(20)]]
    got = run(GradientScheduler(tasks, eps=0.0), curves, [1.0, 1.0, 1.0], 40)
    assert got[0] >= 28 and got[1] <= 8 and got[2] <= 4, got
    assert tasks[0].best_ms is not None and tasks[0].best_ms < 5.0


def test_every_task_first_gets_one_trial_largest_first():
    tasks = [TaskState(1, 1e6), TaskState(5, 1e6), TaskState(2, 1e6)]
    s = GradientScheduler(tasks, eps=0.0)
    order = []
    for _ in range(3):
        i = s.next()
        order.append(i)
        tasks[i].add(5.0, 1.0)
    assert order == [1, 2, 0]


def test_a_cheaper_trial_wins_at_equal_gain():
    tasks = [TaskState(1, 1e6, "a"), TaskState(1, 1e6, "b")]
    curves = [[10 - 0.3 * k for k in range(30)]] * 2
    got = run(GradientScheduler(tasks, eps=0.0), curves, [10.0, 1.0], 30)
    assert got[1] > 2 * got[0], got


def test_a_task_slower_per_flop_than_a_similar_one_gets_the_trials():
    # Same operators and FLOPs; X takes 8 ms once, Y 2 ms four times: the same share of the
    # end-to-end time, but Y shows X could be 4x faster (Ansor's similar-task estimate).
    tasks = [TaskState(1, 1e6, "conv"), TaskState(4, 1e6, "conv")]
    got = run(GradientScheduler(tasks, eps=0.0), [[8.0], [2.0]], [1.0, 1.0], 30)
    assert got[0] >= 3 * got[1], got
    alone = [TaskState(1, 1e6, "conv"), TaskState(4, 1e6, "other")]  # not similar: no such hint
    got_alone = run(GradientScheduler(alone, eps=0.0), [[8.0], [2.0]], [1.0, 1.0], 30)
    assert got_alone[0] < got[0], (got, got_alone)


def test_exhausted_tasks_get_nothing_and_the_end_is_none():
    tasks = [TaskState(1, 1.0), TaskState(1, 1.0)]
    s = GradientScheduler(tasks)
    tasks[0].exhausted = True
    assert {s.next() for _ in range(20)} == {1}
    tasks[1].exhausted = True
    assert s.next() is None
