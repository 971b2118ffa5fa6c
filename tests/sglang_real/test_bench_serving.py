"""SGLang's own benchmark client against the simulator agrees with autospec's client.

``python -m sglang.benchmark.serving`` (sglang 0.5.23's path of ``sglang.bench_serving``)
from the real sglang interpreter (AUTOSPEC_SGLANG_PYTHON, see conftest.py) and autospec's
``run_level`` send the same prompts (a ShareGPT file written by
``autospec.bench.export_sharegpt``) with the same output length, concurrency and request
count to one noiseless simulator, one after the other. Their output throughput and mean
TPOT (both defined as bench_serving defines them) must agree within 5%.

bench_serving needs a tokenizer: a word-level one over the prompts' and the simulator's
words is built here with ``tokenizers`` and saved through
``transformers.PreTrainedTokenizerFast.save_pretrained`` in the sglang interpreter, so its
token counts equal the simulator's (whitespace words).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from autospec.bench import LevelPlan, Workload, export_sharegpt, prompts, run_levels
from autospec.metrics import summarize
from sim.processes import Sim, SimPool  # tests/ is on sys.path (rootdir-relative packages)

pytestmark = pytest.mark.sglang

CONCURRENCY = 4
NUM_PROMPTS = 16
OUTPUT_LEN = 200
TIME_SCALE = 0.5  # simulated durations halved: ~2 s per client run
SIM_ARGS = (
    "--model-path",
    "sim",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--sim-noise",
    "off",
    "--sim-load-seconds",
    "0",
    "--sim-warmup-seconds",
    "0",
    "--sim-time-scale",
    str(TIME_SCALE),
)
WORKLOAD = Workload("random", input_len=32, output_len=OUTPUT_LEN, api="completions", seed=3)

# Runs in the sglang interpreter: argv = output folder, JSON file with the vocabulary.
# Exits NO_DATASETS when `datasets`, which bench_serving imports at start-up, is missing.
NO_DATASETS = 3
TOKENIZER_SCRIPT = f"""
import json, sys
try:
    import datasets
except ImportError:
    sys.exit({NO_DATASETS})
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = json.load(open(sys.argv[2]))
vocab = {{word: i for i, word in enumerate(["<unk>", "<s>", "</s>", *words])}}
tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                        eos_token="</s>").save_pretrained(sys.argv[1])
"""


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    pool = SimPool(tmp_path_factory.mktemp("sim"))
    try:
        server = pool.start(*SIM_ARGS)
        server.wait_ready()
        yield server
    finally:
        pool.close()


@pytest.fixture(scope="module")
def prompts_and_tokenizer(preflight, sglang_python, tmp_path_factory) -> tuple[Path, Path]:
    """(ShareGPT file of the workload's prompts, tokenizer folder)."""
    root = tmp_path_factory.mktemp("bench_serving")
    sharegpt = root / "prompts.json"
    export_sharegpt(WORKLOAD, NUM_PROMPTS, sharegpt)
    words = sorted({w for p in prompts(WORKLOAD, NUM_PROMPTS) for w in p.text.split()} | {f"w{i}" for i in range(512)})
    (root / "words.json").write_text(json.dumps(words))
    tokenizer = root / "tokenizer"
    built = subprocess.run(
        [sglang_python, "-c", TOKENIZER_SCRIPT, str(tokenizer), str(root / "words.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if built.returncode == NO_DATASETS:
        pytest.fail(f"{sglang_python} lacks `datasets` (bench_serving imports it); rerun tools/install_sglang_cpu.sh")
    assert built.returncode == 0, built.stderr[-2000:]
    return sharegpt, tokenizer


def run_bench_serving(python: str, url: str, sharegpt: Path, tokenizer: Path, output: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("SGLANG_IS_IN_CI", None)
    argv = [
        python,
        "-m",
        "sglang.benchmark.serving",
        "--backend",
        "sglang-oai",
        "--base-url",
        url,
        "--model",
        "sim",
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(sharegpt),
        "--sharegpt-output-len",
        str(OUTPUT_LEN),
        "--num-prompts",
        str(NUM_PROMPTS),
        "--max-concurrency",
        str(CONCURRENCY),
        "--output-file",
        str(output),
        "--disable-tqdm",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and output.exists(), (proc.stdout[-3000:], proc.stderr[-3000:])
    return json.loads(output.read_text().splitlines()[-1])


def test_bench_serving_agrees_with_autospecs_client(prompts_and_tokenizer, sglang_python, sim, tmp_path):
    sharegpt, tokenizer = prompts_and_tokenizer
    theirs = run_bench_serving(sglang_python, sim.url, sharegpt, tokenizer, tmp_path / "bench_serving.jsonl")
    assert theirs["completed"] == NUM_PROMPTS
    assert theirs["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN

    workload = Workload("file", path=str(sharegpt), output_len=OUTPUT_LEN, api="completions")
    result = run_levels(sim.url, workload, [LevelPlan(CONCURRENCY, num_requests=NUM_PROMPTS, warmup_requests=1)])
    ours = summarize(result[CONCURRENCY])
    assert ours.n_ok == NUM_PROMPTS and ours.completion_tokens == NUM_PROMPTS * OUTPUT_LEN

    assert ours.agg_output_tok_s == pytest.approx(theirs["output_throughput"], rel=0.05)
    assert ours.tpot_ms_mean == pytest.approx(theirs["mean_tpot_ms"], rel=0.05)
