"""What every part of the simulator's model shares: the server's flags after SGLang's
rewrites (`ServerConfig`), the rejection SGLang raises at argument time
(`ArgumentRejected`), release comparison (`version_at_least`) and units. Pure.

The model, one module per concept (docs/simulator.md):
    flags --arguments.resolve_args--> ServerConfig --memory.init_outcome--> InitOutcome
    ServerConfig --acceptance.accept_length / timing.step_seconds, prefill_seconds--> speed
    prompt text --prompts.classify_prompt--> workload kind (which sets the acceptance)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from packaging.version import Version

__all__ = [
    "GB",
    "GENERIC_MAX_RUNNING_REQUESTS",
    "SPEC_DEFAULT_MAX_RUNNING_REQUESTS",
    "ArgumentRejected",
    "ServerConfig",
    "version_at_least",
]

#: ("Max running requests is reset to 48 for speculative decoding." -- 0.5.x, 0.5.16 log)
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48
#: SGLang's cap on the request-slot pool when nothing else limits it (generic default)
GENERIC_MAX_RUNNING_REQUESTS = 4096

#: SGLang's "GB" in its log lines is 2**30 bytes; the profile's sizes use the same unit
GB = float(2**30)

INIT_STATUSES = ("ok", "kv_pool_too_small", "cuda_graph_oom", "weights_oom", "invalid_draft_tree", "too_few_gpus")


class ArgumentRejected(ValueError):
    """SGLang rejected the flags at argument time; str(e) is SGLang's own message.

    `exc_type` is the exception class SGLang raises ("ValueError", "AssertionError",
    "TypeError"); the last line of the real traceback is f"{exc_type}: {message}"
    (`traceback_line`). The real server exits non-zero within about a second."""

    def __init__(self, message: str, exc_type: str = "ValueError") -> None:
        super().__init__(message)
        self.exc_type = exc_type

    @property
    def traceback_line(self) -> str:
        text = str(self)
        return f"{self.exc_type}: {text}" if text else self.exc_type


@dataclass(frozen=True)
class ServerConfig:
    """Server flags after SGLang's rewrites (speculative fields are 0 without speculation)."""

    model_path: str
    tp_size: int
    speculative_algorithm: str | None  # None = no speculation; NEXTN already rewritten to EAGLE
    speculative_num_steps: int
    speculative_eagle_topk: int
    speculative_num_draft_tokens: int
    mem_fraction_static: float
    max_running_requests: int | None  # None = not set by the user
    cuda_graph_max_bs: int
    attention_backend: str
    page_size: int
    context_length: int | None
    enable_dp_attention: bool
    dp_size: int
    pp_size: int
    #: --speculative-draft-kv-cache-dtype (sglang 0.5.23): the draft pool's KV dtype; None
    #: or "auto" = the target's (the simulator's KV is bf16, as its log line says)
    speculative_draft_kv_cache_dtype: str | None = None
    #: SGLang's warning lines for the rewrites it applied, in order, worded as the profile's
    #: sglang_version logs them (e.g. "Max running requests is reset to 48 ..."); not a flag
    notes: tuple[str, ...] = ()

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None

    def as_dict(self) -> dict[str, Any]:
        """Flag name -> value, as SGLang's /server_info reports resolved arguments."""
        data = asdict(self)
        data.pop("notes")
        return data


@lru_cache(maxsize=512)
def version_at_least(version: str, minimum: str) -> bool:
    """True if release `version` is `minimum` or newer (PEP 440 order: 0.5.13rc1 is older
    than 0.5.13, 0.5.16.post1 newer than 0.5.16). Cached: parsing dominated resolve_args."""
    return Version(version) >= Version(minimum)
