"""The command line in the user's language (issue 21): --help, argparse's own sentences, the nearest verb or option,
the notices for old spellings and the refusals of bad values come from the catalogue (domain `cli`); option names,
values and exit codes stay as they are; the English reads as it always did, and the README's table stays English."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.cli import option_kinds as kind
from gpuready.i18n import message
from gpuready.model import ExitCode
from gpuready.cli.option_table import BEGIN, END, option_table, shown_actions, verb_parsers
from gpuready.cli.usage import ARGPARSE_SENTENCES, cells, in_language

README = Path(__file__).resolve().parents[1] / "docs" / "options.md"  # the option table's page (issue 32)
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def english_environment(monkeypatch):
    """No language from the environment unless a test sets one; 80 columns for --help."""
    for name in ("GPUREADY_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(list(argv))
    assert exited.value.code == 0
    return capsys.readouterr().out


def _error(capsys, *argv: str) -> str:
    """The one line on stderr of a usage error (exit 2)."""
    assert cli.main(list(argv)) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("gpuready: "), error
    return error.removeprefix("gpuready: ").rstrip("\n")


# --- --help ----------------------------------------------------------------------------------------------------

def test_check_help_in_chinese_keeps_every_option_name(capsys):
    english, chinese = _help(capsys, "check", "--help"), _help(capsys, "--lang", "zh", "check", "--help")
    assert chinese.startswith("用法：gpuready check [-h] [--bundle PATH]") and english.startswith("usage: gpuready check")
    flags = re.findall(r"(?m)^  (-[-\w]+(?:, -[-\w]+)*(?: [A-Z]+| \{[\w,]+\})?)", english)
    assert len(flags) > 15 and all(flag in chinese for flag in flags)
    for line in ("  -h, --help            显示此帮助信息并退出",
                 "  --bundle PATH         读取支持包（文件夹或 .tar.gz），而不是检查本机",
                 "  --fail-on {fail,warn}\n                        warn：有警告时也以 1 退出",
                 "\n选项:\n", "\n输入限制:\n"):
        assert line in chinese, line
    unwrapped = "".join(chinese.split())
    assert "可见GPU不恰好是N个时判为失败；介于1和1,024之间的整数（每节点GPU数）" in unwrapped  # --expect-gpus
    assert "show this help" not in chinese and "options:" not in chinese and "input limits" not in chinese


def test_every_option_of_every_verb_has_chinese_help():
    english, chinese = (dict(verb_parsers(cli.build_parser(lang=lang))) for lang in ("en", "zh"))
    for verb, parser in chinese.items():
        assert CJK.search(parser.format_help().splitlines()[-1] + (parser.description or "大")), verb
        for en_action, zh_action in zip(shown_actions(english[verb]), shown_actions(parser)):
            assert en_action.option_strings == zh_action.option_strings and en_action.dest == zh_action.dest
            assert CJK.search(zh_action.help), (verb, zh_action.option_strings, zh_action.help)
            assert en_action.help not in parser.format_help(), (verb, en_action.help)
        titles = [group.title for group in parser._action_groups if group._group_actions]
        assert all(CJK.search(title) for title in titles), (verb, titles)


def test_the_verb_list_and_descriptions_are_chinese(capsys):
    top = _help(capsys, "--lang", "zh", "--help")
    assert "    check               硬件清单与静态检查（默认子命令）" in top
    assert "这台机器准备好进行多 GPU PyTorch 训练了吗？" in top and "--version             显示程序版本号并退出" in top
    assert "gpuready diagnose PATH...：文件、文件夹或支持包" in _help(capsys, "--lang", "zh", "diagnose", "--help")


def test_chinese_help_lines_fit_the_terminal(capsys):
    """argparse counts characters; a Chinese character takes two columns: the help wraps by columns."""
    for verb in cli.VERBS:
        lines = _help(capsys, "--lang", "zh", verb, "--help").splitlines()
        assert max(cells(line) for line in lines) <= 80, verb


def test_the_english_help_is_unchanged(capsys):
    english = _help(capsys, "check", "--help")
    for line in ("  -h, --help            show this help message and exit",
                 "  --expect-gpus N       fail unless exactly N GPUs are visible; a whole number",
                 "\noptions:\n", "\ninput limits:\n"):
        assert line in english, line


def test_the_readme_table_stays_english_in_a_chinese_environment(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    text = README.read_text()
    assert text[text.index(BEGIN):text.index(END) + len(END)] == option_table()


# --- mistakes: one sentence in the user's language, exit 2 -----------------------------------------------------

@pytest.mark.parametrize("argv, english, chinese", [
    (["chek"],
     "'chek' is not a verb; did you mean check? the verbs are check, collect, validate, burn, monitor, diagnose, plan, "
     "launch, bench, compare, report, fleet",
     "'chek' 不是子命令；是不是想用 check？可用的子命令：check, collect, validate, burn, monitor, diagnose, plan, "
     "launch, bench, compare, report, fleet"),
    (["diagnose"], "the following arguments are required: PATH", "缺少必需的参数：PATH"),
    (["validate", "--device", "gpu"],
     "argument --device: invalid choice: 'gpu' (choose from 'auto', 'cuda', 'cpu'); did you mean cpu?",
     "参数 --device：无效的选择：'gpu'（可选：'auto', 'cuda', 'cpu'）；是不是想用 cpu？"),
    (["check", "--expect-gpus", "-3"],
     "argument --expect-gpus: '-3' is not a whole number of GPUs per node from 1 to 1,024",
     "参数 --expect-gpus：'-3' 不是介于 1 和 1,024 之间的整数（每节点 GPU 数）"),
    (["burn", "--interval", "nan"],
     "argument --interval: 'nan' is not a number of seconds above 0 to 3,600",
     "参数 --interval：'nan' 不是大于 0 且不超过 3,600 的数（秒）"),
    (["monitor", "--prometheus-port", "0"],
     "argument --prometheus-port: '0' is not a TCP port from 1 to 65,535",
     "参数 --prometheus-port：'0' 不是介于 1 和 65,535 之间的 TCP 端口号"),
    (["validate", "--max-bytes", "64X"],
     "argument --max-bytes: '64X' is not a size like 64M or 1G (1 byte to 1T)",
     "参数 --max-bytes：'64X' 不是形如 64M 或 1G 的大小（1 字节到 1T）"),
    (["check", "--circuit", "abc"],
     "argument --circuit: 'abc' is not a circuit: VOLTSV/AMPSA (230V/16A), household, or watts (2200W, 2.2kW, 3680) "
     "above 0 to 10,000,000",
     "参数 --circuit：'abc' 不是供电支路：VOLTSV/AMPSA（230V/16A）、household，或瓦数（2200W、2.2kW、3680），大于 0 且"
     "不超过 10,000,000"),
    (["check", "--bundle"], "argument --bundle: expected one argument", "参数 --bundle：需要一个值"),
    (["check", "--json=1"], "argument --json: ignored explicit argument '1'", "参数 --json：此选项不接受值：'1'"),
    (["check", "--max-a", "1", "--max-"],
     "ambiguous option: --max- could match --max-members, --max-archive-mib, --max-file-mib, --max-held-mib",
     "选项有歧义：--max- 可匹配 --max-members, --max-archive-mib, --max-file-mib, --max-held-mib"),
    (["check", "--bundel", "x"],
     "unrecognized arguments: --bundel x; did you mean --bundle? (the options: gpuready check --help)",
     "无法识别的参数：--bundel x；是不是想用 --bundle？（选项见 gpuready check --help）"),
    (["plan", "--zzz"], "unrecognized arguments: --zzz (the options: gpuready plan --help)",
     "无法识别的参数：--zzz（选项见 gpuready plan --help）"),
])
def test_a_mistake_is_one_sentence_in_either_language(capsys, argv, english, chinese):
    assert _error(capsys, *argv) == english
    assert _error(capsys, "--lang", "zh", *argv) == chinese  # --lang before the verb
    assert _error(capsys, *argv, "--lang=zh") == chinese  # or anywhere after it


def test_the_language_of_the_environment_is_the_parsers(capsys, monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert _error(capsys, "diagnose") == "缺少必需的参数：PATH"
    assert _error(capsys, "diagnose", "--lang", "en") == "the following arguments are required: PATH"
    monkeypatch.setenv("GPUREADY_LANG", "en")
    assert _error(capsys, "diagnose") == "the following arguments are required: PATH"


def test_lang_before_a_verb_without_it_and_after_launchs_double_dash(capsys):
    """launch, collect and monitor have no --lang: a --lang before the verb still chooses the language of its help
    and errors. After launch's `--` the words are the job's, not gpuready's."""
    assert _error(capsys, "--lang", "zh", "launch", "slurm", "--nnodes", "0") == \
        "参数 --nnodes：'0' 不是介于 1 和 100,000 之间的整数（节点数）"
    assert "--name NAME           任务名称" in _help(capsys, "--lang", "zh", "launch", "--help")
    assert _error(capsys, "launch", "slurm", "--nnodes", "0", "--", "train.py", "--lang", "zh") == \
        "argument --nnodes: '0' is not a whole number of nodes from 1 to 100,000"
    assert _error(capsys, "--lang", "xx", "check") == "argument --lang: invalid choice: 'xx' (choose from 'en', 'zh')"


def test_lang_before_the_verb_reaches_the_verbs_report(capsys):
    assert cli.main(["--lang", "zh", "plan", "--preset", "tiny", "--machine", "1xH100-SXM"]) == ExitCode.READY
    assert "规划 plan" in capsys.readouterr().out


# --- notices for old spellings ----------------------------------------------------------------------------------

def test_old_spellings_say_the_new_one_in_chinese(capsys):
    cli.build_parser(lang="zh").parse_args(["launch", "torchrun", "--gpus-per-node", "4"])
    assert capsys.readouterr().err == "gpuready: --gpus-per-node 已改为 --nproc-per-node；旧写法将在下一版本移除\n"
    cli.build_parser(lang="zh").parse_args(["plan", "--gpus", "8"])
    assert capsys.readouterr().err == ("gpuready: --gpus 已改为 --nproc-per-node（每节点 GPU 数，乘以 --nnodes 即总数；"
                                       "--gpus 用于指定具体的 GPU，与 validate 和 burn 中相同）；旧写法将在下一版本移除\n")
    assert cli.build_parser(lang="zh").parse_args(["bench", "--preset", "125M"]).preset == "gpt2-small"
    assert capsys.readouterr().err == "gpuready: 预设 125M 已改为 gpt2-small；旧名称将在下一版本移除\n"
    cli.build_parser(lang="en").parse_args(["plan", "--gpus", "8"])
    assert capsys.readouterr().err == ("gpuready: --gpus is now --nproc-per-node (GPUs per node, times --nnodes; --gpus "
                                       "names GPUs, as in validate and burn); the old spelling goes in the next "
                                       "release\n")


# --- the pieces --------------------------------------------------------------------------------------------------

def _kinds():
    for name, value in vars(kind).items():
        if callable(value) and hasattr(value, "describe"):
            yield name, value
    yield from (("SHAPE." + name, value) for name, value in kind.SHAPE.items())


@pytest.mark.parametrize("name, kind_of", list(_kinds()))
def test_each_types_range_in_words_is_its_describe_in_english_and_chinese_in_chinese(name, kind_of):
    assert in_language(kind_of.range_words, "en") == kind_of.describe, name
    chinese = in_language(kind_of.range_words, "zh")
    assert CJK.search(chinese) and not re.search(r"\b(?:a|of|from|to|above|number|whole)\b", chinese), (name, chinese)


def test_argparse_still_says_the_sentences_the_catalogue_translates():
    """The templates are argparse's own msgids: a Python whose argparse words them otherwise shows here."""
    source = inspect.getsource(argparse)
    assert [template for template in ARGPARSE_SENTENCES if template not in source] == []
    for template, msg_id in ARGPARSE_SENTENCES.items():  # the English catalogue says what argparse says
        fields = re.findall(r"%\((\w+)\)[sr]", template) or (["value"] if re.search("%[sr]", template) else [])
        values = {field: f"<{field}>" for field in fields}
        assert message(msg_id, "en", **values) == re.sub(r"%\((\w+)\)[sr]|%[sr]", lambda match: f"<{match[1] or 'value'}>",
                                                        template)
