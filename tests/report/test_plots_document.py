"""Plots a person can read (units, legend, classes distinguished, baseline and picks
marked) and the report folder `autospec report` writes."""

from __future__ import annotations

import shlex

from autospec.cli.main import main
from autospec.report import recommend
from autospec.report.plots import concurrency_figure, pareto_figure, render

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_pareto_plot_labels_units_and_distinguishes_every_class(data):
    picks = recommend(data, data.baseline_trial())
    fig = pareto_figure(data, data.baseline_trial(), picks)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "per-request output speed at C=1 (tok/s)"
    assert ax.get_ylabel() == "aggregate output throughput at C=32 (tok/s)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "Pareto front (4), 95% intervals",
        "latency pick: #2",
        "throughput pick: #4",
        "knee pick: #1",  # rings around the picked points
        "dominated (3)",
        "baseline #0 steps=3 mem=0.8 draft=4",  # only the flags that vary between configurations
        "infeasible, measured (1): violated an SLO",
        "infeasible, no numbers (3): rejected 1, kv_pool_too_small 1, skipped 1",
    ]
    notes = [t.get_text() for t in ax.texts]
    assert sorted(n.split()[0] for n in notes) == ["#1", "#2", "#3", "#4"]  # each front point is labelled


def test_concurrency_plot_shows_the_front_and_the_baseline_at_every_level(data):
    fig = concurrency_figure(data, data.baseline_trial())
    left, right = fig.axes[:2]
    assert left.get_xlabel() == right.get_xlabel() == "concurrency C (requests in flight)"
    assert left.get_ylabel() == "per-request output speed (tok/s)"
    assert right.get_ylabel() == "aggregate output throughput (tok/s)"
    labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert len(labels) == 5 and labels[-1].endswith("(baseline)") and "max_req 11" in labels[0]
    assert [float(x) for x in left.lines[0].get_xdata()] == [1.0, 4.0, 32.0]


def test_render_writes_a_png_and_returns_stable_svg(data, tmp_path):
    svg = render(pareto_figure(data), tmp_path / "p")
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG_MAGIC
    assert svg.startswith("<svg") and svg == render(pareto_figure(data), tmp_path / "q")


def test_report_folder_holds_plots_report_commands_and_ladder(made, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", *made.args, "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "adaptive.json",
        "concurrency.html",
        "concurrency.png",
        "launch-knee.sh",
        "launch-latency.sh",
        "launch-throughput.sh",
        "pareto.html",
        "pareto.png",
        "report.html",
        "report.md",
    ]
    md = (out / "report.md").read_text()
    for part in (
        "## Recommendations",
        "## Pareto front",
        "| trial | configuration |",
        "![Pareto front",
        "pareto.png",
        "concurrency.png",
        "## Adaptive speculation ladder",
        "autospec export --study made",
        "--pick knee --format systemd",
    ):
        assert part in md
    html = (out / "report.html").read_text()
    assert (
        html.count("<svg") == 2 and "<table>" in html and "http" not in html.split("<svg")[0].replace("http://www.w3.org", "")
    )  # self-contained: nothing fetched
    script = (out / "launch-latency.sh").read_text()
    body = "".join(line for line in script.splitlines(True) if not line.startswith("#")).replace("\\\n", " ")
    argv = shlex.split(body)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert argv[argv.index("--speculative-num-steps") + 1] == "3" and argv[argv.index("--mem-fraction-static") + 1] == "0.88"
    assert (out / "pareto.png").read_bytes()[:8] == PNG_MAGIC


def test_report_refuses_a_file_as_its_folder(made, tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["report", *made.args, "-o", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_study_without_measurements_still_gets_a_report(tmp_path):
    import optuna

    from autospec.report import snapshot
    from autospec.report.document import write_report

    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["output_tok_s@c1", "agg_output_tok_s@c32"])
    written = write_report(snapshot(study), tmp_path / "r")
    assert sorted(p.name for p in written.files) == [
        "concurrency.html",
        "concurrency.png",
        "pareto.html",
        "pareto.png",
        "report.html",
        "report.md",
    ]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Nothing is on the Pareto front yet: run autospec optimize." in md
    assert "no configuration has been measured successfully yet" in md
