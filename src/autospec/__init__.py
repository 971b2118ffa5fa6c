"""autospec: tune SGLang speculative decoding as an Optuna study.

The package is layered (see docs/architecture.md, checked by `lint-imports`): validated
inputs and shared facts (`config`, `space`, `workload`, ...) at the bottom, `metrics`
above them, I/O and per-trial decisions (`launcher`, `bench`, `feasibility`) above
that, then the trial record (`records`), the performance model (`model`), the study
and the report, and the CLI on top. `autospec.sim` is a stand-alone simulated SGLang
server and imports nothing from the rest but SGLang's argument rules and facts
(`sglang_rules`, `sglang_facts`, at the bottom so that it may).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
