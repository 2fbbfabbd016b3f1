"""The message catalogue (issue 21, "Chinese and English, whole"): both languages hold the same ids with the same
placeholders, the PO files are valid for the standard tools, and the language comes from --lang, then GPUREADY_LANG,
then the POSIX locale variables in their order of precedence."""

from __future__ import annotations

import pytest
from babel.messages.pofile import read_po

from gpuready.i18n import LANGUAGES, catalogue, catalogue_paths, choose_language, message, placeholders


def _domains(lang: str) -> dict[str, dict[str, str]]:
    domains = {}
    for path in catalogue_paths(lang):
        with open(path, "rb") as po_file:
            read = read_po(po_file, abort_invalid=True)  # valid for the standard tools
        assert str(read.locale) == lang, path
        domains[path.name] = {entry.id: entry.string for entry in read if entry.id}
    return domains


def test_each_domain_has_both_languages_with_every_id_translated():
    english, chinese = _domains("en"), _domains("zh")
    assert sorted(english) == sorted(chinese) and "gpuready.po" in english
    for domain, texts in english.items():
        assert sorted(texts) == sorted(chinese[domain]), domain
        assert all(texts.values()) and all(chinese[domain].values()), domain


def test_every_id_has_both_languages_with_the_same_placeholders():
    english, chinese = catalogue("en"), catalogue("zh")
    assert sorted(english) == sorted(chinese)
    mismatched = {msg_id: (placeholders(english[msg_id]), placeholders(chinese[msg_id])) for msg_id in english
                  if placeholders(english[msg_id]) != placeholders(chinese[msg_id])}
    assert not mismatched


def test_a_message_is_filled_in_its_language():
    assert message("label.summary", "en", fail=1, warn=2, pass_=3, skip=4) == "1 fail, 2 warn, 3 pass, 4 skip"
    assert message("label.summary", "zh", fail=1, warn=2, pass_=3, skip=4) == "失败 1，警告 2，通过 3，跳过 4"
    assert message("label.not_ready", "fr") == "NOT READY"  # a language without a catalogue: English


@pytest.mark.parametrize("option, environ, expected", [
    ("zh", {"GPUREADY_LANG": "en", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"GPUREADY_LANG": "zh", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"GPUREADY_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
    (None, {"LANGUAGE": "zh_CN:en", "LC_ALL": "C", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    (None, {"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"LANG": "zh_CN.GB18030"}, "zh"),
    (None, {"LANG": "de_DE.UTF-8"}, "en"),
    (None, {}, "en"),
    (None, {"LANGUAGE": "", "LANG": "zh_CN.UTF-8"}, "zh"),  # an empty variable is unset
])
def test_the_language_comes_from_the_option_then_the_environment(option, environ, expected):
    assert choose_language(option, environ) == expected


def test_the_console_follows_the_locale_when_no_lang_is_given(monkeypatch, capsys):
    from conftest import FIXTURES
    from gpuready.cli.main import main

    for name in ("GPUREADY_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    main(["check", "--bundle", str(FIXTURES / "h200-collect")])
    assert "就绪但有警告 READY WITH WARNINGS" in capsys.readouterr().out
    main(["check", "--bundle", str(FIXTURES / "h200-collect"), "--lang", "en"])
    out = capsys.readouterr().out
    assert "READY WITH WARNINGS" in out and "就绪" not in out


def test_a_catalogued_finding_keeps_its_english_and_renders_in_chinese(capsys):
    """network.* are in the catalogue (check_network.po): the JSON keeps the English sentence as it always read, with
    the id and values that render it again; the Chinese console renders it from there."""
    import io
    import json

    from rich.console import Console

    from conftest import FIXTURES
    from gpuready.cli.main import main
    from gpuready.report.console import render_console

    main(["check", "--bundle", str(FIXTURES / "h200-collect"), "--json"])
    document = json.loads(capsys.readouterr().out)
    gdr = next(finding for finding in document["findings"] if finding["check_id"] == "network.gdr")
    assert (gdr["message"], gdr["message_id"], gdr["message_values"]) == (
        "No RDMA device, so GPUDirect RDMA does not apply.", "network.gdr.no_rdma", {})
    out = io.StringIO()
    render_console(document, Console(file=out, width=100), verbose=True, lang="zh")
    assert "没有 RDMA 设备，GPUDirect RDMA 不适用。" in out.getvalue()
    assert "No RDMA device" not in out.getvalue()


def test_placeholders_fill_in_both_languages():
    from gpuready.i18n import finding_text, said

    text = finding_text(said("network.port.in_use", port=29500))
    assert text["message"] == ("TCP port 29500 is already in use: torchrun's default rendezvous would fail with "
                               "'address already in use'.")
    assert text["fix"] == ("Find the holder with `ss -ltnp 'sport = :29500'`, or pass --master-port / --rdzv-endpoint "
                           "with another port.")
    assert message("network.port.in_use.fix", "zh", port=29500) == \
        "用 `ss -ltnp 'sport = :29500'` 找出占用者，或用 --master-port / --rdzv-endpoint 换一个端口。"


def test_the_chinese_inventory_fits_80_columns_without_cutting_a_header(capsys):
    """rich measured `温度 temp` short and cropped it to `温度 te` at 80 columns; bilingual headers are two lines."""
    import io

    from rich.cells import cell_len
    from rich.console import Console

    from conftest import FIXTURES
    from gpuready.evidence.reader import read_bundle
    from gpuready.checks.registry import CheckOptions
    from gpuready.report.console import render_console
    from gpuready.pipeline import check_files

    document = check_files(read_bundle(FIXTURES / "h200-collect"), CheckOptions())[0].to_dict()
    out = io.StringIO()
    render_console(document, Console(file=out, width=80), lang="zh")
    lines = out.getvalue().splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    header = [line.split() for line in lines if line.startswith("GPU ")][0]
    assert header[-3:] == ["power", "limit", "temp"] and "0000:00:06.0" in out.getvalue()
