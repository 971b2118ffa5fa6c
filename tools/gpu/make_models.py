"""Model folders for real SGLang with `--load-format dummy` (random weights, nothing downloaded).

    python3 make_models.py OUT_DIR

Writes, under OUT_DIR, one folder per model: a Llama `config.json`, a word-level tokenizer
(`tokenizer.json`, `tokenizer_config.json`) and `generation_config.json`. No weights: SGLang
0.5.16 fills every tensor with random values when started with `--load-format dummy`, so
memory, kernels and speed are those of the shapes below and acceptance is not a trained
model's.

    m     the tiny target: 16 layers, hidden 2048, 16 heads (4 KV), intermediate 5632 (1.36 GB bf16)
    d     its EAGLE draft: one `LlamaForCausalLMEagle` layer of the same width
    m8b   Llama-3-8B's shapes: 32 layers, hidden 4096, 32 heads (8 KV), intermediate 14336
          (about 14 GB bf16; GPU-bound on an H200 where the tiny one is bound by the host's CPU)
    d8b   its EAGLE draft: one `LlamaForCausalLMEagle` layer of the same width

`m` and `d` are the same as those of ../shared/tools/real-sglang/make_models.py, so the tiny
target's studies and fixtures stay comparable. All four share one vocabulary of 512 words
("[UNK]", "<s>", "</s>", "w3" ... "w511"), whitespace-split: the synthetic prompts
("1 2 3 ...") are all "[UNK]" to it, as they were in every earlier run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 512
CONTEXT = 4096

_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB,
    "max_position_embeddings": CONTEXT,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
}
TINY = {
    **_LLAMA,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 16,
}
LLAMA_8B = {
    **_LLAMA,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
}


def eagle_draft(target: dict) -> dict:
    """A one-layer EAGLE draft as wide as `target` (SGLang's `LlamaForCausalLMEagle`)."""
    return {**target, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1}


MODELS = {"m": TINY, "d": eagle_draft(TINY), "m8b": LLAMA_8B, "d8b": eagle_draft(LLAMA_8B)}


def tokenizer_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok.to_str()


def write(out: Path) -> list[Path]:
    tokenizer = tokenizer_json()
    written = []
    for name, config in MODELS.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "tokenizer.json").write_text(tokenizer)
        (folder / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "PreTrainedTokenizerFast",
                    "bos_token": "<s>",
                    "eos_token": "</s>",
                    "unk_token": "[UNK]",
                    "model_max_length": CONTEXT,
                }
            )
        )
        (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
        written.append(folder)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: make_models.py OUT_DIR (e.g. /tmp/sgmodels)", file=sys.stderr)
        return 2
    folders = write(Path(argv[0]))
    print("models at", argv[0], "(" + ", ".join(f.name for f in folders) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
