"""Every verb speaks Chinese under `--lang zh` (issue 32): its help, its report (console, Markdown, JSON messages), its
errors and what it writes (launch's scripts), with recorded fixtures and the paths a machine without a GPU takes.

The detector is tests/test_no_english_left.py's (four or more English words in a row are a sentence), applied to
what the command printed, after taking out what stays English by design:
- names and quotes: text in backticks or quotes, paths and file names, check and message ids, option spellings;
- the English half of a bilingual label: the Chinese console follows a label with its English one (`温度 temp`,
  report/labels.py), so each catalogue entry whose Chinese text holds its English text lends that English;
- ALLOWED below, each with its reason.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES
from gpuready.cli.main import VERBS, main
from gpuready.i18n import catalogue
from gpuready.verbs.monitor import describe
from test_no_english_left import CHECK_ID, ENGLISH_RUN, FIELD_TERMS

ALLOWED = (
    *FIELD_TERMS,
    "NVML Shared Library Not Found",  # NVML's own error text, quoted after its error name (monitor, burn)
    "Indexed Job + headless Service",  # Kubernetes object kinds, as kubectl names them (launch k8s)
    "Job with Pod-to-Pod Communication",  # the title of the kubernetes.io page a manifest comment cites
)
QUOTED = re.compile(r"`[^`\n]*`|\"[^\"\n]*\"|“[^”\n]*”|'[^'\n]*'|《[^》\n]*》")
PATH_LIKE = re.compile(r"(?<![\w])(?:--?[\w-]+|\S*/\S*|\S+\.(?:json|log|txt|xml|yaml|sh|sbatch|gz)\b)")
WIDE = re.compile(r"[\u4e00-\u9fff]")
CAPITALS = re.compile(r"(?<![\w-])[A-Z][A-Z0-9_|:]+(?![\w-])")
"""A word in capitals: a metavar (FILE, BASE), a variable (HEAD, NCCL_SOCKET_IFNAME), an acronym (GPU, CPU)."""
NAME_LIST = re.compile(r"[\w.-]+(?:, [\w.-]+){2,}")
"""Three or more single words separated by commas: a list of names (an option's choices, measurement kinds)."""


def bilingual_halves() -> list[str]:
    """The English text of every entry whose Chinese text holds it (a label followed by its English one)."""
    english, chinese = catalogue("en"), catalogue("zh")
    halves = {english[msg_id] for msg_id in english
              if msg_id in chinese and WIDE.search(chinese[msg_id]) and english[msg_id] in chinese[msg_id]
              and "{" not in english[msg_id]}
    return sorted({form for half in halves for form in (half, half.upper())}, key=len, reverse=True)


def english_left(text: str) -> list[str]:
    """The runs of English words in `text` once names, quotes and bilingual labels are taken out."""
    text = QUOTED.sub(" ", text)
    for name in sorted(ALLOWED, key=len, reverse=True) + bilingual_halves():
        if len(name) >= 3:
            text = re.sub(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", " | ", text)
    text = NAME_LIST.sub(" | ", CAPITALS.sub(" | ", PATH_LIKE.sub(" | ", CHECK_ID.sub(" | ", text))))
    return [match.group(0) for match in ENGLISH_RUN.finditer(" ".join(text.split()))]


def run_zh(argv: list[str], capsys, monkeypatch, tmp_path) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    for name in ("GPUREADY_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "10000")  # one line per paragraph: a quoted log line stays whole
    try:
        code = main(argv)
    except SystemExit as exit_:  # --help: argparse prints and exits
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


BUNDLE = str(FIXTURES / "h200-collect")
NCCL_LOG = str(FIXTURES / "diagnose" / "nccl" / "p2p-hang-nccl-606.log")
BURN = str(FIXTURES / "h200-burn" / "burn-60s-report.json")
VALIDATE = str(FIXTURES / "h200-validate-timing" / "validate-default-1.json")
LAUNCH = ["--nnodes", "2", "--nproc-per-node", "8", "--bundle", BUNDLE]

COMMANDS = {
    "help": ["--help"],
    **{f"{verb} --help": [verb, "--help"] for verb in VERBS},
    "check a bundle": ["check", "--bundle", BUNDLE, "--verbose"],
    "check a bundle as Markdown": ["check", "--bundle", BUNDLE, "--markdown", "-"],
    "diagnose a log": ["diagnose", NCCL_LOG, "--verbose"],
    "plan": ["plan", "--preset", "gpt2-small", "--nproc-per-node", "8"],
    "report": ["report", BURN, VALIDATE],
    "compare": ["compare", VALIDATE, str(FIXTURES / "h200-validate-timing" / "validate-default-2.json")],
    "fleet": ["fleet", BURN, VALIDATE, "--verbose"],
    "fleet as Markdown": ["fleet", BURN, VALIDATE, "--markdown", "-"],
    "burn without a GPU": ["burn", "--duration", "1"],
    "monitor without a GPU": ["monitor", "--count", "1"],
    "collect to a missing folder": ["collect", "--out", "no/such/folder/bundle.tar.gz"],
    "launch without a command": ["launch", "torchrun"],
    "a mistyped option": ["plan", "--nproc-per-nod", "8"],
    "launch torchrun": ["launch", "torchrun", *LAUNCH, "--", "train.py", "--config", "big.yaml"],
    "launch slurm": ["launch", "slurm", *LAUNCH, "--", "train.py"],
    "launch slurm validate": ["launch", "slurm", *LAUNCH, "--", "validate", "--quick"],
    "launch k8s": ["launch", "k8s", *LAUNCH, "--image", "img:1", "--", "train.py"],
    "launch k8s jobset bench": ["launch", "k8s", *LAUNCH, "--image", "img:1", "--k8s-kind", "jobset", "--",
                                "bench"],
    "launch k8s trainjob validate": ["launch", "k8s", *LAUNCH, "--image", "img:1", "--k8s-kind", "trainjob", "--",
                                     "validate"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_no_english_sentence_is_left_under_lang_zh(name, capsys, monkeypatch, tmp_path):
    argv = COMMANDS[name]
    split = argv.index("--") if "--" in argv else len(argv)
    _code, output = run_zh([*argv[:split], "--lang", "zh", *argv[split:]] if argv != ["--help"]
                           else ["--lang", "zh", "--help"], capsys, monkeypatch, tmp_path)
    assert WIDE.search(output), output
    assert english_left(output) == [], output


def test_the_detector_finds_an_english_sentence_and_keeps_names():
    assert english_left("结论：this sentence was never translated.") == ["this sentence was never translated"]
    assert english_left("修复 fix: 运行 `sudo lspci -vv -s 0000:01:00.0 now please` 并查看 /var/log/some long file") == []
    assert english_left("温度 temp\n测量 measurement subject value expected of expected") == []


def test_every_verb_takes_lang_and_the_locale(capsys, monkeypatch, tmp_path):
    for verb in VERBS:
        _code, output = run_zh([verb, "--help"], capsys, monkeypatch, tmp_path)
        assert "--lang" in output, verb
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for name in ("GPUREADY_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    assert main(["launch", "torchrun"]) == 2
    assert WIDE.search(capsys.readouterr().err)
    assert main(["launch", "torchrun", "--lang", "en"]) == 2  # --lang wins over the locale, and is not `--image`
    assert "--image" not in capsys.readouterr().err


def test_json_messages_follow_lang_and_render_again_in_english(capsys, monkeypatch, tmp_path):
    code, output = run_zh(["check", "--bundle", BUNDLE, "--json", "--lang", "zh"], capsys, monkeypatch, tmp_path)
    chinese = json.loads(output)
    code_en, output_en = run_zh(["check", "--bundle", BUNDLE, "--json"], capsys, monkeypatch, tmp_path)
    english = json.loads(output_en)
    assert code == code_en
    assert chinese["language"] == "zh" and "language" not in english
    warned = [finding for finding in chinese["findings"] if finding["status"] == "warn"]
    assert warned and all(WIDE.search(finding["message"]) and WIDE.search(finding["fix"]) for finding in warned)
    assert not any(WIDE.search(finding["message"]) for finding in english["findings"])
    assert [f["message_id"] for f in chinese["findings"]] == [f["message_id"] for f in english["findings"]]
    saved = tmp_path / "zh.json"
    saved.write_text(output)
    _code, rendered = run_zh(["report", str(saved), "--lang", "en"], capsys, monkeypatch, tmp_path)
    assert not WIDE.search(rendered), rendered
    assert "System RAM is 0.90× the total GPU memory" in " ".join(rendered.split())


MONITOR_EVENTS = [
    ({"gpu": 2, "event": "pcie_width_drop", "from": 16, "to": 8}, "GPU2: PCIe link narrowed x16 → x8"),
    ({"gpu": 0, "event": "power_limit_change", "from_w": 700.0, "to_w": 500.4}, "GPU0: power limit 700 W → 500 W"),
    ({"gpu": 0, "event": "ecc_increment", "kind": "uncorrectable", "delta": 2, "total": 5},
     "GPU0: +2 uncorrectable ECC error(s) (volatile total 5)"),
    ({"gpu": 1, "event": "throttle_start", "reason": "hw_slowdown"}, "GPU1: clocks limited by hw_slowdown"),
    ({"gpu": 1, "event": "throttle_stop", "reason": "hw_slowdown"}, "GPU1: hw_slowdown ended"),
    ({"gpu": 3, "event": "gpu_lost", "detail": "the GPU stopped answering NVML"},
     "GPU3: LOST (the GPU stopped answering NVML)"),
    ({"gpu": 0, "event": "xid", "xid": 79}, "GPU0: FAIL Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS (catalog "
                                            "severity critical): Drain the node and reboot"),
]


@pytest.mark.parametrize("event, english", MONITOR_EVENTS)
def test_monitor_events_are_said_in_the_run_language(event, english):
    """monitor's event lines (a GPU is needed to see them live): English as before, Chinese under --lang zh."""
    assert describe(event).startswith(english)
    chinese = describe(event, "zh")
    assert WIDE.search(chinese) and english_left(chinese) == [], chinese
