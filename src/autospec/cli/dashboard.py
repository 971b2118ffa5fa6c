"""`autospec dashboard`: optuna-dashboard on the study's storage and artifact store.

Serves on 127.0.0.1 only (reach a remote GPU host with ``ssh -L PORT:127.0.0.1:PORT``).
``--port 0`` asks the OS for a free port. The first line printed is the study's URL;
the server runs until interrupted.

optuna-dashboard 0.21.0 facts (checked by running it): ``optuna_dashboard.wsgi(storage,
artifact_store=...)`` returns a WSGI app; the study page is ``/dashboard/studies/<id>``;
its Pareto-front plot splits trials into feasible and infeasible by the list-valued
system attribute ``constraints`` (autospec writes it beside Optuna 5's constraints).
``run_server`` uses a single-threaded wsgiref server and cannot report the port it
bound, so a threading wsgiref server is used here instead.

`publish` writes the study's note (``optuna_dashboard.save_note``) and the pooled front's
figure (``save_plotly_graph_object``, which calls only ``figure.to_json()``: no plotly
needed) from `autospec.report.dashboard`; `autospec optimize` calls it when a study ends,
`autospec dashboard` before it serves, so the dashboard shows what `autospec pareto` shows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from autospec.cli.common import add_study_command
from autospec.cli.pareto import open_existing_handle
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna
    from _typeshed.wsgi import WSGIApplication

    from autospec.report import Answer
    from autospec.study.storage import StorageHandle

HOST = "127.0.0.1"


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise here
        pass


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "dashboard",
        help="serve optuna-dashboard for a study on 127.0.0.1",
        description="Serve optuna-dashboard on 127.0.0.1 with the study's storage and artifact store (server logs "
        "and benchmark JSON of each trial). Prints the study's URL; stop with Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=8080, help="port to listen on; 0 picks a free one (default 8080)")
    p.set_defaults(handler=run, on_interrupt=(0, "dashboard stopped"))


def artifact_dir(handle: StorageHandle, args: argparse.Namespace) -> Path:
    """Where `autospec optimize` keeps the study's artifacts (`autospec.study.files`)."""
    from autospec.study.files import StudyLayout

    return StudyLayout.beside(handle.local_path, Path(args.studies_dir), args.study).artifacts_dir


def make_app(handle: StorageHandle, study: optuna.Study, artifacts: Path | None) -> WSGIApplication:
    import optuna
    import optuna_dashboard

    store = optuna.artifacts.FileSystemArtifactStore(str(artifacts)) if artifacts is not None else None
    return optuna_dashboard.wsgi(handle.storage, artifact_store=store)


def publish(study: optuna.Study) -> Answer:
    """Write the study's note and front figure for optuna-dashboard (module docstring);
    returns the answer they show."""
    import optuna_dashboard

    from autospec.report import answer, snapshot
    from autospec.report.dashboard import FIGURE_ID, FigureJson, front_figure, note_markdown

    data = snapshot(study)
    found = answer(data, data.baseline_trial())  # the baseline `autospec pareto` uses by default
    optuna_dashboard.save_note(study, note_markdown(found))
    figure = front_figure(found)
    if figure is not None:
        optuna_dashboard.save_plotly_graph_object(study, FigureJson(figure), graph_object_id=FIGURE_ID)
    return found


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port; use 1-65535, or 0 for a free one")
    handle, study = open_existing_handle(args)
    publish(study)
    artifacts = artifact_dir(handle, args)
    app = make_app(handle, study, artifacts if artifacts.is_dir() else None)
    try:
        server = make_server(HOST, args.port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {HOST}:{args.port}: {exc.strerror}; pick another --port, or 0 for a free one"
        ) from None
    port = server.server_port
    study_id = study._study_id  # the dashboard's URLs use the storage's study id
    print(f"http://{HOST}:{port}/dashboard/studies/{study_id}", flush=True)
    note = f"artifacts: {artifacts}" if artifacts.is_dir() else f"no artifact folder {artifacts}; logs are not attached"
    print(
        f"optuna-dashboard for study {study.study_name} ({handle.description}); {note}; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
