"""Issue 20: hostile options and input files get one sentence and exit 2 — never a traceback, exit 3 or 4, or a hang.

Every numeric option has a type with a range and a unit (gpuready.options); model configs, prices and reports are
read from regular files only, at most 1 MiB (64 MiB for a report), as strict JSON with bounded nesting, every field
checked; --out is a regular file or -.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuready.cli import main as cli
from gpuready.model import ExitCode

MACHINE = ["--machine", "8xH100-SXM"]
GPT2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
VALIDATE_REPORT = Path(__file__).parent / "fixtures" / "plan" / "h200-validate-compute.json"


def _one_sentence(capsys, argv: list[str]) -> str:
    code = cli.main(argv)
    error = capsys.readouterr().err
    assert code == ExitCode.USAGE, (argv, code, error)
    assert error.startswith("gpuready: ") and error.count("\n") == 1, (argv, error)
    assert "Traceback" not in error and "internal error" not in error, (argv, error)
    return error


# --- numeric options -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "100", "--ffn-hidden", "-1000", *MACHINE],
    ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "100", "--kv-heads", "-2", *MACHINE],
    ["plan", "--preset", "llama3-8b", "--kv-heads", "-8", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--nnodes", "1e9", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--nnodes", "1000000000", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--machine", "1000000000xH100-SXM"],
    ["plan", "--preset", "gpt2-small", "--machine", "8xH100-SXM (1000000000 nodes)"],
    ["plan", "--preset", "gpt2-small", "--nproc-per-node", "99999999999999999999999", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--seq", "inf", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--utilisation", "nan", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--price-kwh", "-1", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--known-lr", "Infinity", *MACHINE],
    ["plan", "--preset", "gpt2-small", "--room-c", "1e308", *MACHINE],
    ["check", "--nnodes", "1e9", "--bundle", "missing"],
    ["check", "--psu-watts", "nan"],
    ["validate", "--timeout", "nan", "--device", "cpu"],
    ["validate", "--timeout", "inf", "--device", "cpu"],
    ["validate", "--startup-timeout", "-inf", "--device", "cpu"],
    ["validate", "--deadline", "nan", "--device", "cpu"],
    ["validate", "--max-bytes", "inf", "--device", "cpu"],
    ["validate", "--max-bytes", "-64M", "--device", "cpu"],
    ["validate", "--nnodes", "1000000000", "--device", "cpu"],
    ["burn", "--interval", "nan", "--device", "cpu"],
    ["burn", "--duration", "99999999999h", "--device", "cpu"],
    ["bench", "--timeout", "nan", "--device", "cpu"],
    ["bench", "--nnodes", "1e9", "--device", "cpu"],
    ["bench", "--ffn-hidden", "-5", "--device", "cpu"],
    ["monitor", "--interval", "nan", "--count", "1"],
    ["monitor", "--count", "-1"],
    ["diagnose", "x", "--expect", "nan"],
    ["launch", "torchrun", "--nnodes", "1e9", "--nproc-per-node", "8", "--", "train.py"],
])
def test_a_hostile_number_is_one_sentence_and_exit_2(capsys, argv):
    _one_sentence(capsys, argv)


def _numeric_options():
    """(verb, option, type) of every option whose type is a number, from the parser itself."""
    parser = cli.build_parser()
    verbs = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for verb, sub in verbs.choices.items():
        for action in sub._actions:
            if action.option_strings and hasattr(action.type, "describe"):
                yield verb, action.option_strings[0], action


def test_every_numeric_option_has_a_type_a_range_and_a_unit_in_its_help():
    seen = list(_numeric_options())
    assert len(seen) > 50
    parser = cli.build_parser()
    verbs = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for verb, sub in verbs.choices.items():
        for action in sub._actions:
            assert action.type not in (int, float), (verb, action.option_strings)
    for verb, option, action in seen:
        if action.help == argparse.SUPPRESS:  # an old spelling, hidden: its new one's help says the range
            continue
        assert action.type.describe in (action.help or ""), (verb, option)
        assert " to " in action.type.describe, (verb, option)
        if action.default is not None:  # the default itself is inside the range
            assert action.type.minimum <= action.default <= action.type.maximum, (verb, option)


NUMERIC = list(_numeric_options())

TEXTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(10**60), max_value=10**60).map(str),
    st.integers(min_value=-5, max_value=70_000).map(str),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e9", "1e400", "-0", "0x10", "1_000", " 8 ", "",
                     "٣", "1e-400", "9" * 5000, "64M", "1T", "2T", "-1G", "1.5G", "0.0000001"]),
    st.text(max_size=30),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(NUMERIC), text=TEXTS)
def test_a_numeric_option_accepts_its_range_or_says_so(option, text):
    """Each numeric type either returns a finite value inside its documented range or raises argparse's type error
    (which the parser turns into one sentence and exit 2): nothing else."""
    _verb, _name, action = option
    kind = action.type
    try:
        value = kind(text)
    except argparse.ArgumentTypeError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    assert kind.minimum <= value <= kind.maximum
    if kind.above_minimum:
        assert value > kind.minimum


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(NUMERIC), text=TEXTS)
def test_the_parser_accepts_or_raises_a_usage_error(option, text):
    verb, name, _action = option
    prefix = {"diagnose": ["diagnose", "x"], "launch": ["launch", "torchrun"]}.get(verb, [verb])
    try:
        cli.build_parser().parse_args([*prefix, f"{name}={text}"])
    except cli.UsageError as error:
        assert "\n" not in str(error)


# --- input files ---------------------------------------------------------------------------------------------

def _config(tmp_path: Path, text: str, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, said", [
    ('{"n_layer": Infinity, "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "Infinity"),
    ('{"n_layer": NaN, "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "NaN"),
    ('{"n_layer": 1e400, "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "beyond"),
    ('{"n_layer": 12, "n_embd": 7680000000000000000000000, "n_head": 12, "vocab_size": 50257}', "n_embd"),
    ('{"n_layer": "12", "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "n_layer"),
    ('{"n_layer": true, "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "n_layer"),
    ('{"n_layer": 12.5, "n_embd": 768, "n_head": 12, "vocab_size": 50257}', "n_layer"),
    ('{"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_inner": -3072}', "n_inner"),
    ('{"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 0}', "n_positions"),
    ('{"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "tie_word_embeddings": "yes"}', "tie_word"),
    ('{"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000, '
     '"num_key_value_heads": -8}', "num_key_value_heads"),
    ('{"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": ' + "9" * 5000 + "}", "digits"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
    ('{"a":' * 70 + "1" + "}" * 70, "nested deeper"),
    ("[1, 2]", "one JSON object"),
    ("\xff\xfe", "config"),
])
def test_a_hostile_model_config_is_one_sentence_and_exit_2(capsys, tmp_path, text, said):
    path = _config(tmp_path, text)
    error = _one_sentence(capsys, ["plan", "--model-config", path, *MACHINE])
    assert "--model-config" in error and said in error, error


def test_a_model_config_that_is_a_device_or_too_large_is_refused(capsys, tmp_path):
    assert "not a regular file (a device)" in _one_sentence(capsys, ["plan", "--model-config", "/dev/zero", *MACHINE])
    assert "not a regular file (a folder)" in _one_sentence(capsys, ["plan", "--model-config", str(tmp_path), *MACHINE])
    big = _config(tmp_path, json.dumps({**GPT2, "padding": "x" * (1 << 20)}))
    assert "larger than 1,024 KiB" in _one_sentence(capsys, ["plan", "--model-config", big, *MACHINE])
    assert cli.main(["plan", "--model-config", _config(tmp_path, json.dumps(GPT2), "ok.json"), *MACHINE, "--json"]) \
        in (ExitCode.READY, ExitCode.NOT_READY)


def test_bench_reads_its_model_config_the_same_way(capsys, tmp_path):
    error = _one_sentence(capsys, ["bench", "--device", "cpu", "--model-config", "/dev/zero",
                                   "--log-dir", str(tmp_path / "logs")])
    assert "--model-config /dev/zero is not a regular file" in error


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """In a subprocess with a timeout: a regression that blocks on a FIFO fails the test instead of hanging it."""
    return subprocess.run([sys.executable, "-m", "gpuready", *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_a_fifo_as_model_config_prices_or_report_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for argv in (["plan", "--model-config", str(fifo), *MACHINE],
                 ["plan", "--preset", "gpt2-small", "--prices", str(fifo), *MACHINE],
                 ["plan", "--preset", "gpt2-small", "--validate-report", str(fifo), *MACHINE]):
        result = _run(argv)
        assert result.returncode == ExitCode.USAGE, (argv, result.stderr)
        assert "is not a regular file (a FIFO)" in result.stderr and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("text, said", [
    ('pue = "x"', "pue"),
    ("pue = inf", "pue"),
    ("pue = nan", "pue"),
    ("electricity_usd_per_kwh = -1", "electricity_usd_per_kwh"),
    ("purchase_usd_per_gpu = 1e300", "purchase_usd_per_gpu"),
    ("rent_usd_per_gpu_hour = true", "rent_usd_per_gpu_hour"),
    ("surprise = 1", "unknown price"),
    ('gpu = 3', "unknown price"),
    ('[gpu."H100 SXM"]\npurchase_usd_per_gpu = [1]', "purchase_usd_per_gpu"),
    ("a = " + "[" * 100_000 + "]" * 100_000, "--prices"),
    ("a = [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]", "unknown price"),
    ("pue = ", "not valid TOML"),
])
def test_a_hostile_prices_file_is_one_sentence_and_exit_2(capsys, tmp_path, text, said):
    path = _config(tmp_path, text, "prices.toml")
    error = _one_sentence(capsys, ["plan", "--preset", "gpt2-small", "--prices", path, *MACHINE])
    assert said in error, error


def test_a_prices_file_not_utf8_or_a_device_is_refused(capsys, tmp_path):
    path = tmp_path / "prices.toml"
    path.write_bytes(b"\xff\xfepue = 1")
    assert "not UTF-8" in _one_sentence(capsys, ["plan", "--preset", "gpt2-small", "--prices", str(path), *MACHINE])
    assert "a device" in _one_sentence(capsys, ["plan", "--preset", "gpt2-small", "--prices", "/dev/zero", *MACHINE])


@pytest.mark.parametrize("edit, said", [
    (lambda text: text.replace("{", '{"x": NaN, ', 1), "NaN"),
    (lambda text: "[" * 1000 + "]" * 1000, "nested deeper"),
    (lambda text: '{"measurements": 3}', "no list of measurements"),
    (lambda text: '{"measurements": [{"name": "matmul_tflops_bf16", "value": 1e300}]}', "holds none of"),
    (lambda text: '{"measurements": [{"name": "matmul_tflops_bf16", "value": true}]}', "holds none of"),
    (lambda text: '{"measurements": [{"name": ["matmul_tflops_bf16"], "value": 3}]}', "holds none of"),
])
def test_a_hostile_validate_report_is_one_sentence_and_exit_2(capsys, tmp_path, edit, said):
    path = _config(tmp_path, edit(VALIDATE_REPORT.read_text()), "validate.json")
    error = _one_sentence(capsys, ["plan", "--preset", "gpt2-small", "--validate-report", path, *MACHINE])
    assert "--validate-report" in error and said in error, error


# --- --out ---------------------------------------------------------------------------------------------------

def test_out_as_a_fifo_is_refused_before_any_work_without_blocking(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    for argv in (["plan", "--preset", "gpt2-small", *MACHINE, "--out", str(fifo)],
                 ["check", "--bundle", str(tmp_path / "missing"), "--out", str(fifo)],
                 ["diagnose", str(tmp_path), "--out", str(fifo)]):
        result = _run(argv)
        assert result.returncode == ExitCode.USAGE, (argv, result.stderr)
        assert f"--out {fifo} is not a regular file (a FIFO)" in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and not result.stdout


def test_out_as_a_device_or_a_folder_is_refused_and_dash_is_stdout(capsys, tmp_path):
    assert "(a device)" in _one_sentence(capsys, ["plan", "--preset", "gpt2-small", *MACHINE, "--out", "/dev/null"])
    assert "is a folder" in _one_sentence(capsys, ["plan", "--preset", "gpt2-small", *MACHINE, "--out", str(tmp_path)])
    assert cli.main(["plan", "--preset", "gpt2-small", *MACHINE, "--out", "-"]) == ExitCode.READY
    captured = capsys.readouterr()
    assert json.loads(captured.out)["findings"] and not (Path.cwd() / "-").exists()
