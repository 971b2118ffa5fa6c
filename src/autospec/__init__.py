"""autospec: tune SGLang speculative decoding as an Optuna study.

The package is layered (see docs/architecture.md): pure logic (`config`, `space`,
`feasibility`, `metrics`) at the bottom, I/O (`launcher`, `bench`) above it,
orchestration (`study`, `report`) above that and the CLI on top. `autospec.sim`
is a stand-alone simulated SGLang server and imports nothing from the rest.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
