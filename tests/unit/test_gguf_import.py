"""`sao import-gguf`: a GGUF file as an ordinary checkpoint, and every bad input as one line.

The GGUF files are written here (`gguf_files`): a tiny random Llama with the local BPE tokenizer,
laid out as llama.cpp's converter lays one out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gguf_files import tiny_gguf
from sao.cli import main
from sao.models.gguf_import import GGUFImportError, import_gguf
from sao.models.local_checkpoint import build_bpe_tokenizer

pytest.importorskip("gguf")
TEXT = "def add(x, y):\n    return x + y  # 17 * 23"


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_an_unquantised_file_imports_to_the_weights_and_tokenizer_it_was_made_from(tmp_path):
    path, original = tiny_gguf(tmp_path / "tiny.gguf")
    imported = import_gguf(path, tmp_path / "out")
    assert imported.architecture == "LlamaForCausalLM" and imported.max_logit_gap == 0.0
    assert imported.has_chat_template
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    reference = build_bpe_tokenizer()
    assert tokenizer.encode(TEXT) == reference.encode(TEXT)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    messages = [{"role": "user", "content": "hi"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == (
        reference.apply_chat_template(messages, tokenize=False)
    )
    ids = torch.tensor([reference.encode(TEXT)])
    assert torch.equal(_logits(model, ids), _logits(original, ids))
    assert not hasattr(model.config, "quantization_config")


def test_a_quantised_file_imports_to_what_transformers_reads_from_it(tmp_path):
    path, original = tiny_gguf(tmp_path / "q8.gguf", quantization="Q8_0")
    import_gguf(path, tmp_path / "out")
    direct = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="q8.gguf")
    written = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    ids = torch.tensor([build_bpe_tokenizer().encode(TEXT)])
    assert torch.equal(_logits(written, ids), _logits(direct, ids))
    # Quantised, so close to the weights it was made from but not equal to them.
    gap = (_logits(written, ids) - _logits(original, ids)).abs().max()
    assert 0 < gap < 0.05


def test_bfloat16_writes_bfloat16_weights(tmp_path):
    path, _ = tiny_gguf(tmp_path / "tiny.gguf")
    import_gguf(path, tmp_path / "out", dtype="bfloat16")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype="auto")
    assert model.dtype == torch.bfloat16


@dataclass
class Done:
    returncode: int
    stderr: str


@pytest.fixture
def sao(capsys, monkeypatch):
    """`sao import-gguf ARGS` run in `cwd` as the command line runs it (in this process)."""

    def run(*args: str, cwd: Path) -> Done:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(["import-gguf", *args])
        return Done(code, capsys.readouterr().err)

    return run


def test_the_command_prints_one_line_and_writes_a_loadable_checkpoint(sao, tmp_path):
    tiny_gguf(tmp_path / "tiny.gguf")
    done = sao("tiny.gguf", "--out", "ckpt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "LlamaForCausalLM" in line and "logits equal the GGUF load's" in line
    assert (tmp_path / "ckpt" / "config.json").is_file()
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    assert oct((tmp_path / "ckpt").stat().st_mode & 0o777) != oct(0o700)


def _one_line_and_nothing_written(done: Done, cwd: Path) -> str:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if "it/s]" not in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (cwd / "out").exists()
    assert not [p for p in cwd.iterdir() if ".partial-" in p.name]
    return lines[0]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: (d / "a.gguf").write_text("not a model"), "not a GGUF file"),
        (lambda d: None, "does not exist"),
        (lambda d: (d / "a.gguf").mkdir(), "is not a file"),
    ],
)
def test_a_file_that_is_not_gguf_is_one_line(sao, tmp_path, make, expected):
    make(tmp_path)
    line = _one_line_and_nothing_written(sao("a.gguf", "--out", "out", cwd=tmp_path), tmp_path)
    assert line.startswith("sao import-gguf: ") and expected in line


def test_a_truncated_file_is_one_line(sao, tmp_path):
    path, _ = tiny_gguf(tmp_path / "whole.gguf")
    data = path.read_bytes()
    (tmp_path / "a.gguf").write_bytes(data[: len(data) // 2])
    line = _one_line_and_nothing_written(sao("a.gguf", "--out", "out", cwd=tmp_path), tmp_path)
    assert "a.gguf" in line


def test_an_architecture_transformers_cannot_read_is_one_line(sao, tmp_path):
    from gguf_files import tiny_llama, write_gguf

    tokenizer = build_bpe_tokenizer()
    write_gguf(tiny_llama(tokenizer), tokenizer, tmp_path / "a.gguf", architecture="nosuchnet")
    line = _one_line_and_nothing_written(sao("a.gguf", "--out", "out", cwd=tmp_path), tmp_path)
    assert "nosuchnet" in line


def test_an_existing_output_is_refused(sao, tmp_path):
    tiny_gguf(tmp_path / "a.gguf")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    done = sao("a.gguf", "--out", "taken", cwd=tmp_path)
    assert done.returncode == 2 and "already exists and is not empty" in done.stderr
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"


def test_a_missing_package_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a)
    )
    path, _ = tiny_gguf(tmp_path / "a.gguf")
    with pytest.raises(GGUFImportError, match=r"needs the package\(s\) gguf: pip install"):
        import_gguf(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
