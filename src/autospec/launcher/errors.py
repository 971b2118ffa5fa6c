"""Why a server did not come up or stopped serving: one typed error per failure kind.

    autospec.errors.RuntimeFailure
    └── LaunchError                 .kind, .log_excerpt, .log_path, .seconds, .returncode, .teardown
        ├── ArgumentsRejected       "rejected_args"       argparse or SGLang's resolver said no
        ├── KvPoolTooSmall          "kv_pool_too_small"   no room left for the KV cache
        ├── CudaGraphOOM            "cuda_graph_oom"      CUDA-graph capture failed
        ├── WeightsOOM              "weights_oom"         out of memory while loading weights
        ├── ForeignGpuMemory        "foreign_gpu_memory"  other processes hold GPU memory
        ├── StartupTimeout          "startup_timeout"     not ready before the deadline
        ├── ServerCrashed           "crashed"             died after it had become ready
        ├── PortInUse               "port_in_use"         the HTTP port was taken
        └── UnknownLaunchFailure    "unknown"             none of the above; carries the log tail

`str(err)` is one line: what happened and what to do. The SGLang lines that prove it
are in `log_excerpt` (secrets redacted), the whole log in `log_path`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from autospec.errors import RuntimeFailure

if TYPE_CHECKING:
    from autospec.launcher.startup import StartupFacts
    from autospec.launcher.teardown import TeardownReport

__all__ = [
    "LaunchError",
    "ArgumentsRejected",
    "KvPoolTooSmall",
    "CudaGraphOOM",
    "WeightsOOM",
    "ForeignGpuMemory",
    "StartupTimeout",
    "ServerCrashed",
    "PortInUse",
    "UnknownLaunchFailure",
    "ERROR_BY_KIND",
    "LAUNCH_FAILURE_KINDS",
]

_MAX_DETAIL_CHARS = 240


class LaunchError(RuntimeFailure):
    """A server failed to start or died; subclasses name the cause.

    Attributes are plain data so the study can store them as trial attributes:
    ``kind`` (stable string), ``detail`` (SGLang's own one-line reason, if any),
    ``log_excerpt`` (the lines that matched, or the log tail), ``log_path``,
    ``seconds`` (from spawn to failure), ``returncode`` (None while it still ran),
    ``teardown`` (the TeardownReport of the cleanup the launcher did, or None),
    ``startup`` (the `StartupFacts` the log held before the failure, or None).
    """

    kind: ClassVar[str] = "unknown"
    problem: ClassVar[str] = "the server failed"
    fix: ClassVar[str] = "read the server log"

    def __init__(
        self,
        detail: str = "",
        *,
        log_excerpt: str = "",
        log_path: Path | str | None = None,
        seconds: float | None = None,
        returncode: int | None = None,
        teardown: TeardownReport | None = None,
    ) -> None:
        self.detail = _one_line(detail)
        self.log_excerpt = log_excerpt
        self.log_path = Path(log_path) if log_path is not None else None
        self.seconds = seconds
        self.returncode = returncode
        self.teardown = teardown
        self.startup: StartupFacts | None = None
        super().__init__(self._message())

    def _message(self) -> str:
        parts = [self.problem]
        if self.returncode is not None:
            parts.append(f"(exit code {self.returncode})")
        text = " ".join(parts)
        if self.detail:
            text += f": {self.detail}"
        text += f"; {self.fix}"
        if self.log_path is not None:
            text += f" (log: {self.log_path})"
        return text

    def __reduce__(self) -> tuple[Any, ...]:  # keep every attribute across pickling (e.g. to another process)
        return (_rebuild, (type(self), self.__dict__.copy()))

    def as_dict(self) -> dict:
        """JSON-ready summary for trial attributes."""
        return {
            "kind": self.kind,
            "message": str(self),
            "detail": self.detail,
            "returncode": self.returncode,
            "seconds": self.seconds,
            "log_path": str(self.log_path) if self.log_path else None,
            "log_excerpt": self.log_excerpt,
            "teardown": self.teardown.as_dict() if self.teardown is not None else None,
        }


class ArgumentsRejected(LaunchError):
    kind = "rejected_args"
    problem = "SGLang rejected the server arguments"
    fix = "this flag combination cannot run with this SGLang version; change or drop the flags"


class KvPoolTooSmall(LaunchError):
    kind = "kv_pool_too_small"
    problem = "no GPU memory left for the KV cache"
    fix = "raise --mem-fraction-static, or use fewer speculative steps / a smaller draft model"


class CudaGraphOOM(LaunchError):
    kind = "cuda_graph_oom"
    problem = "CUDA-graph capture failed"
    fix = "lower --cuda-graph-max-bs or --mem-fraction-static"


class WeightsOOM(LaunchError):
    kind = "weights_oom"
    problem = "out of GPU memory while loading the model"
    fix = "use more GPUs (--tp-size), a smaller or quantized model, or free the GPUs (autospec doctor)"


class ForeignGpuMemory(LaunchError):
    kind = "foreign_gpu_memory"
    problem = "other processes hold GPU memory"
    fix = "run `autospec doctor` to list them and stop them before launching"


class StartupTimeout(LaunchError):
    kind = "startup_timeout"
    problem = "the server was not ready before the startup deadline"
    fix = "raise the startup deadline if the model is large, or read the log for a hang"


class ServerCrashed(LaunchError):
    kind = "crashed"
    problem = "the server died while serving"
    fix = "read the log tail; the configuration may be unstable under load"


class PortInUse(LaunchError):
    kind = "port_in_use"
    problem = "the server port is already in use"
    fix = "free the port or leave the port unset so autospec picks a free one"


class UnknownLaunchFailure(LaunchError):
    kind = "unknown"
    problem = "the server failed for a reason autospec does not recognise"
    fix = "read the log tail in the error or the log file"


#: Each failure kind -> its error class, in the order of the tree above.
ERROR_BY_KIND: dict[str, type[LaunchError]] = {
    cls.kind: cls
    for cls in (
        ArgumentsRejected,
        KvPoolTooSmall,
        CudaGraphOOM,
        WeightsOOM,
        ForeignGpuMemory,
        StartupTimeout,
        ServerCrashed,
        PortInUse,
        UnknownLaunchFailure,
    )
}

#: Every ``LaunchError.kind`` a launch can fail with (the outcomes a study records for a
#: launched trial that did not serve), in the order of the tree above.
LAUNCH_FAILURE_KINDS: tuple[str, ...] = tuple(ERROR_BY_KIND)


def _rebuild(cls: type[LaunchError], state: dict) -> LaunchError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    RuntimeFailure.__init__(error, error._message())
    return error


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) > _MAX_DETAIL_CHARS:
        line = line[: _MAX_DETAIL_CHARS - 3] + "..."
    return line
