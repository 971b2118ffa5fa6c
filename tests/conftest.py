"""Suite-wide fixtures: a real PostgreSQL server for the storage tests (marker `postgres`).

`postgres_server` (session scope, started on first use): ``initdb`` + ``pg_ctl start`` on a
free loopback port in a temporary folder, trust authentication, fsync off; stopped and
removed at the end of the session. PostgreSQL refuses to run as root, so under root the
server runs as the ``postgres`` system user (or a created ``autospec-pg`` user). Missing
binaries FAIL the test with the fix (`.ci/run` installs the ``postgresql`` package).

`postgres_url`: a fresh, empty database on that server for one test, as a SQLAlchemy URL.
`postgres_instance`: a server of one test's own, which the test may stop and start again.

`tuners`: starts `autospec optimize` as a subprocess in its own session (as a terminal
runs it) and, at teardown, kills what is left and fails the test if any simulator process
of the test still runs. `sim_space`: a small search space where every candidate launches.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from simspace import kill_all, processes_mentioning, sim_space_text  # tests/ is on sys.path (rootdir conftest)

_PG_USER = "autospec"


@dataclass
class PostgresServer:
    host: str
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"


def _pg_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: PATH first, then Debian's versioned folders."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "pg_ctl").is_file() and Path(candidate, "initdb").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_user() -> str | None:
    """None: run as the current user. Under root: a system user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "autospec-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "autospec-pg"],
        check=True,
        capture_output=True,
    )
    return "autospec-pg"


def _run_as(user: str | None, argv: list[str]) -> subprocess.CompletedProcess:
    if user is not None:
        runuser = shutil.which("runuser")
        argv = [runuser, "-u", user, "--", *argv] if runuser else ["su", user, "-s", "/bin/sh", "-c", " ".join(argv)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


class PostgresInstance:
    """One PostgreSQL server of the test session in its own folder; `stop()` and `start()`
    take it away and bring it back on the same port with the same data."""

    def __init__(self) -> None:
        bin_dir = _pg_bin_dir()
        if bin_dir is None:
            pytest.fail(
                "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; "
                "install them (apt-get install postgresql; .ci/run does this) to run the postgres tests"
            )
        self.bin_dir = bin_dir
        self.user = _server_user()
        self.base = Path(tempfile.mkdtemp(prefix="autospec-pg-"))
        self.data = self.base / "data"
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        init = _run_as(
            self.user, [str(bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", _PG_USER, "-E", "UTF8", "--no-sync"]
        )
        if init.returncode != 0:
            shutil.rmtree(self.base, ignore_errors=True)
            pytest.fail(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        self.port = _free_port()
        self.server = PostgresServer("127.0.0.1", self.port, _PG_USER)

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        return _run_as(self.user, [str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args])

    def start(self) -> None:
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        started = self._pg_ctl("-l", str(self.base / "server.log"), "-o", options, "-w", "-t", "60", "start")
        if started.returncode != 0:
            log = (self.base / "server.log").read_text(errors="replace") if (self.base / "server.log").exists() else ""
            pytest.fail(f"pg_ctl start failed: {started.stderr.strip() or started.stdout.strip()} {log[-500:]}")

    def stop(self) -> None:
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    instance = PostgresInstance()
    try:
        instance.start()
        yield instance.server
    finally:
        instance.remove()


@pytest.fixture
def postgres_instance():
    """A PostgreSQL server of this test alone (it may stop and restart it); started."""
    instance = PostgresInstance()
    try:
        instance.start()
        yield instance
    finally:
        instance.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A new empty database for one test."""
    import psycopg  # psycopg 3: the driver SQLAlchemy 2.1 uses for postgresql:// URLs

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(
        host=postgres_server.host, port=postgres_server.port, user=postgres_server.user, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.url(name)


# ---------------------------------------------------------------- the tuner as a subprocess
SIM_SPACE = sim_space_text()


SIM_FLAGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


class Tuner:
    """`autospec optimize ...` run as a terminal would: a subprocess leading its own
    session and process group (so its servers, in sessions of their own, are not in it)."""

    def __init__(self, cwd: Path, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.cwd = cwd
        self.argv = argv
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.stdout = self.stderr = ""

    def start(self) -> Tuner:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autospec.cli.main", *self.argv],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_until(self, predicate, what: str, timeout_s: float = 60.0, poll_s: float = 0.05) -> None:
        """Poll `predicate()` until true; fail (with the tuner's output) if the tuner exits first."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if not self.running:
                self.wait()
                pytest.fail(f"the tuner exited ({self.proc.returncode}) before {what}: {self.stderr[-2000:]}")
            if time.monotonic() > deadline:
                self.kill9()  # its output, for the failure; the fixture then reaps its servers
                pytest.fail(f"timed out waiting for {what}; the tuner's stderr: {self.stderr[-2000:]}")
            time.sleep(poll_s)

    def signal(self, sig: int) -> None:
        """Send `sig` to the tuner's process group, as a terminal sends Ctrl-C."""
        os.killpg(self.proc.pid, sig)

    def kill9(self) -> None:
        """SIGKILL the tuner's whole process group and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.wait()

    def wait(self, timeout_s: float = 120.0) -> int:
        out, err = self.proc.communicate(timeout=timeout_s)
        self.stdout += out or ""
        self.stderr += err or ""
        return self.proc.returncode


class Tuners:
    """Makes `Tuner`s working in one test's tmp dir; knows that test's simulator processes."""

    sim_flags = SIM_FLAGS

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Tuner] = []

    def __call__(self, argv: list[str], env: dict[str, str] | None = None) -> Tuner:
        tuner = Tuner(self.tmp_path, argv, env)
        self.started.append(tuner)
        return tuner

    def leftovers(self) -> dict[int, str]:
        """Simulator processes of this test still running: pid -> command line."""
        return processes_mentioning(str(self.tmp_path))


@pytest.fixture
def tuners(tmp_path: Path):
    """A `Tuners` factory. At teardown every tuner's group is killed, and the test FAILS if
    a simulator process of this test is still running (after killing it)."""
    factory = Tuners(tmp_path)
    yield factory
    for tuner in factory.started:
        if tuner.running:
            tuner.kill9()
    left = factory.leftovers()
    kill_all(left)
    assert not left, f"simulator processes left running: {left}"


@pytest.fixture
def sim_space(tmp_path: Path) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(SIM_SPACE)
    return path


@pytest.fixture
def no_leftover_sims(tmp_path: Path):
    """Fails the test if it leaves a simulator process running (and kills it)."""
    yield
    left = processes_mentioning(str(tmp_path))
    kill_all(left, os.killpg)
    assert not left, f"simulator processes left running: {sorted(left)}"
