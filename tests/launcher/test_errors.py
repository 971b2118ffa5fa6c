"""The launch-failure kinds: one tuple derived from the error classes."""

from __future__ import annotations

import inspect

from autospec.errors import RuntimeFailure
from autospec.launcher import LAUNCH_FAILURE_KINDS, LaunchError
from autospec.launcher import errors as launcher_errors
from autospec.launcher.classify import classify_failure


def test_every_error_class_has_its_kind_listed_once():
    classes = [
        cls
        for _, cls in inspect.getmembers(launcher_errors, inspect.isclass)
        if issubclass(cls, LaunchError) and cls is not LaunchError
    ]
    assert sorted(cls.kind for cls in classes) == sorted(LAUNCH_FAILURE_KINDS)
    assert len(set(LAUNCH_FAILURE_KINDS)) == len(LAUNCH_FAILURE_KINDS)


def test_the_kinds_a_study_records_today_are_all_there():
    recorded = (
        "rejected_args",
        "kv_pool_too_small",
        "cuda_graph_oom",
        "weights_oom",
        "foreign_gpu_memory",
        "startup_timeout",
        "crashed",
        "port_in_use",
        "unknown",
    )
    assert recorded == LAUNCH_FAILURE_KINDS


def test_whatever_the_classifier_answers_has_a_listed_kind():
    answers = [
        classify_failure("", 1),
        classify_failure("", None, timed_out=True, seconds=3.0),
        classify_failure("RuntimeError: boom", -9, after_ready=True),
        classify_failure("OSError: [Errno 98] Address already in use", 1),
    ]
    assert all(isinstance(error, RuntimeFailure) and error.kind in LAUNCH_FAILURE_KINDS for error in answers)
    assert {error.kind for error in answers} == {"unknown", "startup_timeout", "crashed", "port_in_use"}
