"""From a finished study to decisions: the Pareto front, counts, exports and plots."""

from autospec.report.front import FrontRow, StudyCounts, counts, front, front_json

__all__ = ["FrontRow", "StudyCounts", "counts", "front", "front_json"]
