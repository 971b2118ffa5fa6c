"""The one answer every feasibility step gives: should this configuration be launched?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Verdict", "STATUSES", "SOURCES"]

STATUSES = ("ok", "rejected", "skipped", "duplicate")
SOURCES = ("static", "preflight", "learned", "dedup")


@dataclass(frozen=True)
class Verdict:
    """A feasibility decision about one candidate.

    status    "ok"; "rejected" (SGLang would refuse it or it cannot run: a static rule or
              preflight); "skipped" (predicted to fail or to be dominated: learned);
              "duplicate" (resolves to a server already measured).
    reason    one line; for rejections SGLang's own message.
    source    "static" | "preflight" | "learned" | "dedup".
    rule      rule id (e.g. "topk_gt1_page_size_backend"), or None.
    resolved  the flags after SGLang's rewrites (e.g. topk=1 -> draft = steps + 1), as far
              as they are known; a plain dict, JSON-ready for the values SGLang uses.
    hardware_dependent
              True when the answer depends on the GPU (e.g. trtllm_mha needs SM90+, or the
              default attention backend decides): only a preflight on the GPU host itself
              settles it.
    """

    status: str
    reason: str = ""
    source: str = "static"
    rule: str | None = None
    resolved: Mapping[str, Any] = field(default_factory=dict)
    hardware_dependent: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Verdict status {self.status!r} is not one of {STATUSES}")
        if self.source not in SOURCES:
            raise ValueError(f"Verdict source {self.source!r} is not one of {SOURCES}")
        one_line = " ".join(str(self.reason).split())
        object.__setattr__(self, "reason", one_line)
        object.__setattr__(self, "resolved", dict(self.resolved))

    @property
    def ok(self) -> bool:
        """True when the configuration may be launched."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for storage (Optuna attributes, JSON)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "source": self.source,
            "rule": self.rule,
            "resolved": dict(self.resolved),
            "hardware_dependent": self.hardware_dependent,
        }
