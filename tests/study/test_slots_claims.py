"""GPU slots (`autospec.study.slots`) and launch claims (`autospec.study.claims`): the pure
rules, and the study lock against real storages (a file lock, PostgreSQL's advisory lock)."""

from __future__ import annotations

import itertools
import threading
import time

import optuna
import pytest

from autospec.errors import UsageError
from autospec.records import Markers, StoredTrial, TrialClass, TrialRecord, TrialStore
from autospec.study.claims import StudyLock, claim_trial, decide_claim
from autospec.study.slots import PORT_SPAN, crowded_out, gpus_per_trial_of, parse_gpus, plan_slots

_R, _C = optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.COMPLETE


def test_gpu_lists_and_ranges_parse_in_the_order_given():
    assert parse_gpus("0-3") == (0, 1, 2, 3)
    assert parse_gpus("4,5, 0-1") == (4, 5, 0, 1)
    assert parse_gpus("0,0") == (0, 0)


@pytest.mark.parametrize("text", ["a", "1-", "3-1", "0;1", ""])
def test_a_malformed_gpu_list_is_a_one_line_error_with_an_example(text):
    with pytest.raises(UsageError, match="--gpus") as err:
        parse_gpus(text)
    assert "\n" not in str(err.value)


def test_slots_take_consecutive_groups_and_leave_the_remainder_unused():
    plan = plan_slots(parse_gpus("0-6"), 2)
    assert [s.gpus for s in plan.slots] == [(0, 1), (2, 3), (4, 5)]
    assert plan.unused == (6,)
    assert not any(s.shared for s in plan.slots)
    windows = [s.ports for s in plan.slots]
    assert all(len(w) == PORT_SPAN for w in windows)
    assert all(a.stop <= b.start for a, b in itertools.pairwise(windows))  # disjoint port windows
    env = plan.slots[1].env()
    assert env == {"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_gpu_listed_twice_makes_two_shared_slots():
    plan = plan_slots(parse_gpus("0,0,1"), 1)
    assert [(s.gpus, s.shared) for s in plan.slots] == [((0,), True), ((0,), True), ((1,), False)]


def test_too_few_gpus_or_a_slot_holding_one_gpu_twice_are_refused():
    with pytest.raises(UsageError, match="one trial needs 4"):
        plan_slots((0, 1), 4)
    with pytest.raises(UsageError, match="twice"):
        plan_slots((0, 0), 2)


def test_gpus_per_trial_follows_the_parallel_sizes():
    assert gpus_per_trial_of({}) == 1
    assert gpus_per_trial_of({"tp_size": 2, "pp_size": 2}) == 4
    assert gpus_per_trial_of({"tp_size": 2, "dp_size": 2}) == 4
    # with DP attention the data-parallel ranks share the tensor-parallel GPUs
    assert gpus_per_trial_of({"tp_size": 4, "dp_size": 4, "enable_dp_attention": True}) == 4


def _trial(number, state, params, launched=False, worker=True, confirm_of=None):
    record = TrialRecord(outcome="ok", candidate=dict(params), launched=launched) if state == _C else None
    klass = TrialClass.RUNNING if state == _R else TrialClass.MEASURED
    return StoredTrial(
        number=number,
        trial_id=number,
        state=state,
        trial_class=klass,
        params=dict(params),
        values=None,
        constraints={},
        record=record,
        markers=Markers(confirm_of=confirm_of),
        worker={"host": "h", "pid": 1} if worker else None,
    )


def test_a_claim_is_granted_while_launched_plus_running_elsewhere_stay_below_the_target():
    trials = [_trial(0, _C, {"x": 1}, launched=True), _trial(1, _R, {"x": 2}), _trial(2, _R, {"x": 3}, worker=False)]
    assert decide_claim(trials, 2, {"x": 3}, target=3).granted
    refused = decide_claim(trials, 2, {"x": 3}, target=2)
    assert not refused.granted and "launches are taken (1 launched, 1 running" in refused.reason


def test_the_same_configuration_running_elsewhere_is_never_claimed_twice():
    trials = [_trial(1, _R, {"x": 2}), _trial(2, _R, {"x": 2}, worker=False)]
    refused = decide_claim(trials, 2, {"x": 2}, target=10)
    assert not refused.granted and "trial 1 of another worker" in refused.reason


def test_confirmation_relaunches_count_toward_the_target_like_any_launch():
    trials = [_trial(0, _C, {"x": 1}, launched=True), _trial(1, _R, {"x": 2}, confirm_of=0)]
    refused = decide_claim(trials, 2, {"x": 3}, target=2)  # trial 1, a confirmation running elsewhere, takes a launch
    assert not refused.granted and "1 running on other workers" in refused.reason
    assert decide_claim(trials, 2, {"x": 3}, target=3).granted


def _contend(lock_of, holders=3, rounds=4):
    """`holders` threads, each with its own StudyLock, enter `rounds` times; returns the
    largest number of holders seen inside at once."""
    inside, peak, guard = [0], [0], threading.Lock()

    def work():
        lock = lock_of()
        for _ in range(rounds):
            with lock.held():
                with guard:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.01)
                with guard:
                    inside[0] -= 1

    errors: list[BaseException] = []

    def guarded():
        try:
            work()
        except BaseException as e:  # a holder that failed would make the peak meaningless
            errors.append(e)

    threads = [threading.Thread(target=guarded) for _ in range(holders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    return peak[0]


def test_the_study_lock_of_a_local_storage_file_admits_one_holder_at_a_time(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    assert _contend(lambda: StudyLock(storage, "s", tmp_path / "s.db")) == 1
    assert (tmp_path / "s.db.autospec-lock").exists()


def test_a_queued_trial_two_workers_popped_is_launched_by_the_first_claim_only(tmp_path):
    """Optuna 5.1 can hand one queued SQLite trial to two processes (its pop is a read, then
    a write, with no row lock): the second claim leaves the trial to the first, untouched."""
    url = f"sqlite:///{tmp_path}/s.db"
    first = optuna.create_study(storage=url, study_name="s", directions=["maximize"])
    first.enqueue_trial({"x": 1})
    second = optuna.load_study(study_name="s", storage=url)
    popped = first.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    twin = optuna.Trial(second, popped._trial_id)  # what the second process's pop returned
    lock = StudyLock(first._storage, "s", tmp_path / "s.db")
    withdrawn: list[str] = []
    stores = [TrialStore(study, [True], []) for study in (first, second)]
    workers = [{"host": "h", "pid": pid, "launch_id": f"l{pid}"} for pid in (1, 2)]
    assert claim_trial(stores[0], lock, popped, 5, True, workers[0], withdrawn.append)
    assert not claim_trial(stores[1], lock, twin, 5, True, workers[1], withdrawn.append)
    assert not withdrawn  # the trial is the first worker's: still running, not failed
    stored = first._storage.get_trial(popped._trial_id)
    assert stored.state == _R and stores[1].worker_of(twin) == workers[0]


def test_a_queued_trial_the_first_worker_withdrew_is_left_by_the_second(tmp_path):
    """The same twin pop, where the first claim is refused (the study's launches are taken) and
    the trial withdrawn, which ends it without a worker record: the second claim leaves it
    instead of failing to write on an ended trial (seen in CI, a worker exiting with Optuna's
    UpdateFinishedTrialError)."""
    url = f"sqlite:///{tmp_path}/s.db"
    first = optuna.create_study(storage=url, study_name="s", directions=["maximize"])
    first.enqueue_trial({"x": 1})
    second = optuna.load_study(study_name="s", storage=url)
    popped = first.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    twin = optuna.Trial(second, popped._trial_id)
    lock = StudyLock(first._storage, "s", tmp_path / "s.db")
    stores = [TrialStore(study, [True], []) for study in (first, second)]
    workers = [{"host": "h", "pid": pid, "launch_id": f"l{pid}"} for pid in (1, 2)]

    def withdraw(reason: str) -> None:
        first.tell(popped, state=optuna.trial.TrialState.FAIL)

    assert not claim_trial(stores[0], lock, popped, 0, True, workers[0], withdraw)  # a target of 0: taken
    withdrawn: list[str] = []
    assert not claim_trial(stores[1], lock, twin, 5, True, workers[1], withdrawn.append)
    assert not withdrawn and stores[1].worker_of(twin) is None


@pytest.mark.postgres
def test_the_study_lock_on_postgresql_admits_one_holder_at_a_time(postgres_url):
    optuna.storages.RDBStorage(postgres_url)  # the schema, once (as the worker that creates a study does)

    def lock():
        return StudyLock(optuna.storages.RDBStorage(postgres_url), "s", None)

    assert _contend(lock) == 1


def test_a_memory_failure_while_other_servers_held_the_shared_gpu_is_said_to_be_crowded_out():
    assert crowded_out("kv_pool_too_small", {"gpu_others_mb_before": 43940.0}) == 43940.0
    assert crowded_out("kv_pool_too_small", {"gpu_others_mb_before": 0.0}) is None  # alone: its own limit
    assert crowded_out("kv_pool_too_small", None) is None
    assert crowded_out("crashed", {"gpu_others_mb_before": 43940.0}) is None  # not a memory failure


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--gpus", "0-x"], "is not a GPU index or range"),
        (["--gpus-per-trial", "2"], "--gpus-per-trial needs --gpus"),
        (["--gpus", "0", "--gpus-per-trial", "2"], "one trial needs 2"),
    ],
)
def test_bad_slot_options_stop_before_any_study_exists(tmp_path, capsys, extra, message):
    from autospec.cli.main import main

    code = main(["optimize", "--sim", "--quiet", "--studies-dir", str(tmp_path / "studies"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not list((tmp_path / "studies").glob("*.db"))
