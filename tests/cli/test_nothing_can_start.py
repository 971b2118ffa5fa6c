"""Nothing can start (the weights do not fit, a missing model path, a flag the server
does not have): one line naming the cause and the fix, exit 3, no wall of proposals."""

from __future__ import annotations

from pathlib import Path

from autospec.cli.main import main


def _optimize(tmp_path: Path, *extra: str) -> list[str]:
    return ["optimize", "--sim", "--studies-dir", str(tmp_path / "studies"), "--trials", "4", *extra]


def _cause_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "nothing can start" in line or "does not accept the flag" in line]


def test_weights_that_do_not_fit_end_the_study_with_one_line_and_exit_3(tmp_path, capsys):
    code = main(_optimize(tmp_path, "--tp-size", "1"))
    out, err = capsys.readouterr()
    assert code == 3
    causes = _cause_lines(out + err)
    assert len(causes) == 1 and "--tp-size 2, the smallest that fits them" in causes[0]
    assert "predicted" not in out + err  # no skipped-proposal lines
    assert "search space exhausted" not in out


def test_weights_that_do_not_fit_on_four_slots_print_the_sizes_once(tmp_path, capfd):
    # the default profile: Qwen3.5-122B-A10B-FP8, 118 GB of weights + a 2.4 GB MTP draft,
    # on GPUs of 95.59 GB with 94.59 GB free before loading; four slot workers, one GPU each
    code = main(_optimize(tmp_path, "--gpus", "0-3", "--tp-size", "1"))
    out, err = capfd.readouterr()
    assert code == 3
    causes = _cause_lines(out + err)
    assert len(causes) == 1, causes
    assert (
        "the model's weights (target 118.0 GB + draft 2.4 GB) need about 120.4 GB per GPU at tp_size 1, "
        "GPU 0 had 94.59 GB free before loading (of 95.59 GB)"
    ) in causes[0]
    assert "use --tp-size 2, the smallest that fits them (about 60.2 GB per GPU)" in causes[0]
    assert "exit codes [3, 3, 3, 3]" in out
    assert "predicted" not in out + err


def test_a_missing_model_path_ends_the_study_with_one_line_and_exit_3(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    code = main(_optimize(tmp_path, "--model-path", str(missing)))
    out, err = capsys.readouterr()
    assert code == 3
    assert _cause_lines(out + err) == [
        f"autospec: error: nothing can start: the model path {missing} does not exist; fix --model-path {missing}"
    ]
    assert "[1/" not in out  # nothing was launched


def test_an_unknown_fixed_flag_ends_with_one_line_and_exit_3(tmp_path, capsys):
    code = main(_optimize(tmp_path, "--flag", "no_such_flag=1"))
    out, err = capsys.readouterr()
    assert code == 3
    causes = _cause_lines(out + err)
    assert len(causes) == 1 and "--flag no_such_flag=1" in causes[0] and "no_such_flag" in causes[0]
    assert "[1/" not in out
