"""Bad input: one line naming the problem and the fix, exit 2, and no study created
or existing study data changed."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import optuna
import pytest

from autospec.cli.main import main

GOOD = textwrap.dedent("""
    [server.flags]
    model_path = "m"
    [params.speculative_num_steps]
    type = "int"
    low = 1
    high = 4
    [params.mem_fraction_static]
    type = "float"
    low = 0.8
    high = 0.9
    step = 0.05
""")


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def existing_study(tmp_path: Path) -> Path:
    """A study with one finished trial, made through the same storage code."""
    from autospec.cli.common import load_space
    from autospec.study.storage import open_storage, open_study

    space_path = tmp_path / "good.toml"
    space_path.write_text(GOOD)
    space = load_space(str(space_path))
    studies = tmp_path / "studies"
    handle = open_storage(None, "kept", studies)
    study = open_study(handle, "kept", space, optuna.samplers.RandomSampler(seed=0))
    study.add_trial(
        optuna.trial.create_trial(
            params={"speculative_num_steps": 2},
            distributions={"speculative_num_steps": optuna.distributions.IntDistribution(1, 4)},
            values=[100.0, 900.0],
            user_attrs={"launched": True, "outcome": "ok"},
        )
    )
    return studies


CASES = [
    ("malformed", "[params.x\n", "not valid TOML"),
    ("unknown metric", GOOD + '[[objectives]]\nmetric = "joules"\nconcurrency = 1\n', "unknown metric 'joules'"),
    ("empty range", GOOD.replace("high = 4", "high = 0"), "speculative_num_steps"),
    ("steps below 1", GOOD.replace("low = 1", "low = 0"), "speculative_num_steps must stay within"),
    ("mem fraction 1.0", GOOD.replace("high = 0.9", "high = 1.0"), "mem_fraction_static must stay within"),
    ("unknown parameter type", GOOD.replace('type = "int"', 'type = "integer"'), "type must be one of"),
    ("tunable and fixed", GOOD.replace('model_path = "m"', 'model_path = "m"\nmem_fraction_static = 0.8'), "both tunable"),
    ("mem fraction 0", GOOD.replace("low = 0.8", "low = 0.0"), "mem_fraction_static must stay within"),
    ("objective twice", GOOD + ('[[objectives]]\nmetric = "output_tok_s"\nconcurrency = 1\n' * 2), "listed twice"),
    ("empty file", "", "bad.toml: no tunable parameter, so there is nothing to tune; add a [params.NAME] table"),
    ("no tunable parameter", '[server.flags]\nmodel_path = "m"\n', "bad.toml: no tunable parameter"),
    (
        "no model_path",
        GOOD.replace('model_path = "m"\n', ""),
        "bad.toml: [server.flags] has no model_path, so no server can start; add model_path",
    ),
    ("top_p 0", GOOD + "[workload]\ntop_p = 0\n", "bad.toml: [workload] top_p must be in (0, 1], got 0; use 1.0"),
    (
        "top_k 0",
        GOOD + "[workload]\ntop_k = 0\n",
        "bad.toml: [workload] top_k must be a positive integer, got 0; leave top_k out to sample from every token",
    ),
    (
        "fixed mem fraction 1.5",
        GOOD.replace("[params.mem_fraction_static]", "[params.x]").replace(
            'model_path = "m"', 'model_path = "m"\nmem_fraction_static = 1.5'
        ),
        "bad.toml: [server.flags] mem_fraction_static must stay within (0, 1) (SGLang rejects other values), got 1.5; use",
    ),
    (
        "fixed tp_size not an integer",
        GOOD.replace('model_path = "m"', 'model_path = "m"\ntp_size = "four"'),
        "bad.toml: [server.flags] tp_size must be an integer, got 'four'; write e.g. tp_size=1",
    ),
]


@pytest.mark.parametrize("label, text, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_space_file(tmp_path, existing_study, capsys, label, text, needle):
    space = tmp_path / "bad.toml"
    space.write_text(text)
    before = digest(existing_study)
    for study in ("kept", "fresh"):  # an existing study is not changed, a new one not created
        code = main(["optimize", "--space", str(space), "--study", study, "--studies-dir", str(existing_study), "--sim"])
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert needle in err
        assert len(err.splitlines()) == 1 and err.startswith("autospec: error:")
        assert digest(existing_study) == before


def studies_created(folder: Path) -> list[Path]:
    """Study files under `folder`: storages and the event logs beside them."""
    return [p for p in folder.rglob("*") if p.suffix in (".db", ".log", ".journal", ".jsonl")] if folder.exists() else []


@pytest.mark.parametrize(
    "storage, needle",
    [
        ("redis://localhost/0", "scheme 'redis' is not supported"),
        ("studies.txt", "neither a database URL nor a journal file"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot open storage"),
        ("sqlite:////nonexistent-dir/x.db", "does not exist"),
    ],
)
def test_bad_storage(tmp_path, capsys, storage, needle):
    space = tmp_path / "good.toml"
    space.write_text(GOOD)
    code = main(["optimize", "--space", str(space), "--storage", storage, "--studies-dir", str(tmp_path / "s"), "--sim"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert needle in err and len(err.splitlines()) == 1
    assert studies_created(tmp_path / "s") == [] and not Path("studies.txt").exists()


def test_study_name_reused_with_another_space_changes_nothing(tmp_path, existing_study, capsys):
    other = tmp_path / "other.toml"
    other.write_text(GOOD.replace("high = 4", "high = 6"))
    before = digest(existing_study)
    code = main(["optimize", "--space", str(other), "--study", "kept", "--studies-dir", str(existing_study), "--sim"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "different search space" in err and "pick another --study name" in err
    assert digest(existing_study) == before


def test_study_name_reused_with_other_objectives_changes_nothing(tmp_path, existing_study, capsys):
    other = tmp_path / "other.toml"
    other.write_text(GOOD + '[[objectives]]\nmetric = "ttft_ms_p50"\nconcurrency = 1\n')
    before = digest(existing_study)
    code = main(["optimize", "--space", str(other), "--study", "kept", "--studies-dir", str(existing_study), "--sim"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "was created with objectives" in err and "pick another --study name" in err
    assert digest(existing_study) == before


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["optimize", "--trials", "0", "--sim"], "--trials must be at least 1"),
        (["optimize", "--confirm", "-1", "--sim"], "--confirm must be 0 or more relaunches"),
        (["optimize", "--space", "nope", "--sim"], "no search-space file 'nope'"),
        (["optimize", "--concurrency", "1,x", "--sim"], "not a list of integers"),
        (["optimize", "--concurrency", "4,1,4", "--sim"], "lists a level twice"),
        (["optimize", "--concurrency", "0,4", "--sim"], "needs positive levels"),
        (["optimize", "--sim", "--sim-profile", "no-such-profile"], "neither a file nor a bundled profile"),
        (["optimize", "--sim", "--sim-time-scale", "0"], "--sim-time-scale 0 must be > 0"),
        (["optimize", "--timeout", "8x", "--sim"], "bad duration"),
        (["optimize", "--flag", "oops", "--sim"], "needs NAME=VALUE"),
        (["optimize", "--sampler", "bayes"], "invalid choice"),
        (["pareto", "--study", "absent"], "no study 'absent'"),
        (["optimize", "--output-len", "0", "--sim"], "--output-len 0 must be at least 1 token"),
        (["optimize", "--ready-timeout", "0", "--sim"], "--ready-timeout 0 must be > 0 seconds"),
    ],
)
def test_bad_arguments(tmp_path, capsys, argv, needle):
    with_dir = argv + ["--studies-dir", str(tmp_path / "s")] if argv[0] in ("optimize", "pareto") else argv
    try:
        code = main(with_dir)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").glob("*.db"))


def test_unknown_flag_name_is_refused_before_any_study(tmp_path, capsys):
    """A typo in a parameter name would make the server reject every trial: the
    simulator's own argument parser (as SGLang's would, via preflight) refuses it first."""
    space = tmp_path / "typo.toml"
    space.write_text(GOOD.replace("[params.speculative_num_steps]", "[params.speculative_num_stepz]"))
    studies = tmp_path / "studies"
    code = main(["optimize", "--space", str(space), "--studies-dir", str(studies), "--sim", "--trials", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "speculative-num-stepz" in err and len(err.splitlines()) == 1
    assert not list(studies.glob("*.db")) and not list(studies.glob("*.log"))


def test_a_space_without_model_path_runs_with_model_path(tmp_path, capsys):
    """The model may come from the command line instead of the file (the simulator needs one too)."""
    space = tmp_path / "nomodel.toml"
    space.write_text(GOOD.replace('model_path = "m"\n', ""))
    studies = tmp_path / "studies"
    code = main(
        [
            "optimize",
            "--space",
            str(space),
            "--model-path",
            "m",
            "--studies-dir",
            str(studies),
            "--sim",
            "--trials",
            "1",
            "--quiet",
            "--sim-load-seconds",
            "0",
            "--sim-warmup-seconds",
            "0",
            "--sim-time-scale",
            "0.05",
            "--output-len",
            "8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "1 launched trials" in out


@pytest.mark.parametrize(
    "flags, expected, code",
    [
        (
            ["--flag", "mem_fraction_static=1.5"],
            "--flag mem_fraction_static=1.5: mem_fraction_static must stay within (0, 1) (SGLang rejects other values), "
            "got 1.5; use a value within that range",
            2,
        ),
        (["--flag=--page-size=0"], "--flag --page-size=0: page_size must stay within [1, 4096]", 2),
        (["--flag", "tp_size=1.5"], "--flag tp_size=1.5: tp_size must be an integer, got 1.5; write e.g. tp_size=1", 2),
        (["--tp-size", "0"], "--tp-size 0: tp_size must stay within [1, 1024]", 2),
        (
            ["--flag", "speculative_num_steps=3"],
            "--flag speculative_num_steps=3: speculative_num_steps is tunable in {space} ([params.speculative_num_steps]), "
            "so it cannot also be fixed; drop --flag speculative_num_steps=3 or use a search space without",
            2,
        ),
        (
            ["--flag", "foo_bar=3"],
            "--flag foo_bar=3: the server does not accept the flag foo_bar (launch_server.py: error: unrecognized "
            "arguments: --foo-bar 3); use SGLang's ServerArgs field names",
            3,  # on every launch: nothing can start
        ),
        (
            ["--flag", "attention_backend=triton", "--flag", "foo-bar=yes"],
            "--flag foo-bar=yes: the server does not accept the flag foo_bar",
            3,
        ),
    ],
)
def test_flag_values_and_names_are_checked_and_named_after_the_option(tmp_path, existing_study, capsys, flags, expected, code):
    space = tmp_path / "good.toml"
    space.write_text(GOOD)
    before = digest(existing_study)
    for study in ("kept", "fresh"):
        exit_code = main(
            ["optimize", "--space", str(space), "--study", study, "--studies-dir", str(existing_study), "--sim", *flags]
        )
        err = capsys.readouterr().err.strip()
        assert exit_code == code and len(err.splitlines()) == 1, err
        assert err.startswith("autospec: error: " + expected.format(space=space)), err
        assert digest(existing_study) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["optimize", "--sim"],
        ["pareto", "--study", "x"],
        ["export", "--study", "x", "--pick", "knee"],
        ["report", "--study", "x", "-o", "out"],
        ["dashboard", "--study", "x"],
        ["import", "--study", "x", "--from", "x.jsonl"],
        ["recover", "--study", "x"],
    ],
    ids=lambda argv: argv[0],
)
@pytest.mark.parametrize("below", [False, True], ids=["file", "below-a-file"])
def test_studies_dir_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys, argv, below):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("not a folder\n")
    folder = "README.md/sub" if below else "README.md"
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--studies-dir", folder])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("autospec: error: argument --studies-dir: README.md")
    assert "is a file, not a folder of studies; pass a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    assert (tmp_path / "README.md").read_text() == "not a folder\n"


def test_a_missing_study_names_the_absolute_folder_from_another_directory(tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["pareto", "--study", "default-sim"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(
        f"autospec: error: no study 'default-sim' in {elsewhere / 'studies'} (default-sim.db does not exist there)"
    )
    assert "point --studies-dir at the folder that holds default-sim.db, or pass --storage" in err
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("command", ["pareto", "report", "export", "dashboard", "worker"])
@pytest.mark.parametrize("storage", ["sqlite:///{}/s.db", "{}/s.log"])
def test_a_read_command_on_a_storage_file_that_does_not_exist_creates_none(tmp_path, capsys, command, storage):
    """A mistyped --storage path is an error, not a new empty database or journal there."""
    folder = tmp_path / "studies"
    folder.mkdir()
    spec = storage.format(folder)
    output = ["-o", str(tmp_path / "report.html")] if command == "report" else []
    assert main([command, "--study", "s", "--storage", spec, *output]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err == f"autospec: error: no study storage at {folder / Path(spec).name} (the file does not exist); check --storage"
    assert list(tmp_path.iterdir()) == [folder] and list(folder.iterdir()) == []


@pytest.mark.parametrize("pick", ["foo", "99", "-1", "8"])
@pytest.mark.parametrize("fmt", ["cmd", "adaptive"])
def test_export_pick_is_checked_for_every_format(tmp_path, capsys, fmt, pick):
    from report.factory import build_study  # tests/ is on sys.path

    made = build_study(tmp_path)
    before = digest(made.studies_dir)
    code = main(["export", *made.args, "--format", fmt, "--pick", pick, "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"autospec: error: --pick {pick}") or err.startswith(f"autospec: error: --pick {pick!r}")
    assert "use latency, throughput, knee or a trial number" in err or "see autospec pareto" in err
    assert not (tmp_path / "out.json").exists() and digest(made.studies_dir) == before
