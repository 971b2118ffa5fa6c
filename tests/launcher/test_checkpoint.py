"""A checkpoint's size on disk: the safetensors index's total, else the weight files."""

from __future__ import annotations

import json

from autospec.launcher.checkpoint import GB, checkpoint_gb


def _model(tmp_path, name="m"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_the_index_total_size_is_the_checkpoint_size(tmp_path):
    folder = _model(tmp_path)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": int(3.5 * GB)}}))
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"x" * 10)  # the index wins
    assert checkpoint_gb(str(folder)) == 3.5


def test_without_an_index_the_weight_files_are_summed(tmp_path):
    folder = _model(tmp_path)
    (folder / "a.safetensors").write_bytes(b"x" * 1024)
    (folder / "b.safetensors").write_bytes(b"x" * 1024)
    (folder / "tokenizer.json").write_bytes(b"x" * 4096)  # not weights
    assert checkpoint_gb(str(folder)) == 2048 / GB
    bins = _model(tmp_path, "bins")
    (bins / "pytorch_model-00001-of-00001.bin").write_bytes(b"x" * 512)
    assert checkpoint_gb(str(bins)) == 512 / GB


def test_a_hugging_face_cache_entry_is_read_from_its_snapshot(tmp_path):
    snapshot = tmp_path / "hub" / "models--org--name" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"x" * 100)
    assert checkpoint_gb("org/name", [tmp_path / "hub"]) == 100 / GB


def test_unknown_when_nothing_is_readable(tmp_path):
    assert checkpoint_gb("org/not-downloaded", [tmp_path]) is None
    assert checkpoint_gb(str(_model(tmp_path))) is None  # a folder without weights
    bad = _model(tmp_path, "bad")
    (bad / "model.safetensors.index.json").write_text("not json")
    assert checkpoint_gb(str(bad)) is None
