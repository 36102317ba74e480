"""The security model (docs/security.md), one claim per section, each with a test.

1. Weights are loaded only from safetensors; nothing is ever unpickled, and
   ``trust_remote_code`` is never set.
2. The server binds localhost only, with XSRF protection on and no usage statistics.
3. A run is launched without a shell; every form value becomes one argv item
   (or a value in a JSON file), never a command.
4. Uploads are sanitised (name, place) and size-limited (bytes, and decompressed).
5. Review text is escaped wherever it is rendered as HTML.
"""
from __future__ import annotations

import json
import re
import shutil
import stat
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from reviewbert.data import files as D
from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import load_checkpoint, load_for_training
from reviewbert.model.labels import FIVE
from reviewbert.training import runs as R

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "reviewbert").rglob("*.py"), *(ROOT / "pages").glob("*.py"),
                  ROOT / "app.py"])
HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\"><svg onload=alert(1)>",
           "</div><iframe src=javascript:alert(1)>", "&lt;b&gt;", "'; DROP TABLE--"]


def _code(path: Path) -> list[tuple[int, str]]:
    """(line number, line) without comments and docstring-only lines: what runs."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = line.split("#", 1)[0]
        if code.strip():
            out.append((n, code))
    return out


def _offenders(pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in SOURCES
            for n, line in _code(p) if rx.search(line)]


# ------------------------------------------------ 1. safetensors only, no remote code
# reviewbert/anatomy/trace.py (the teaching page's masked-LM step) still reads a base model's
# pytorch_model*.bin names with torch.load(weights_only=True) and loads its masked LM
# without use_safetensors=True. The lead is asked to change those two lines; then
# empty this list (the test fails while it names lines that are gone).
PENDING: list[str] = []  # every model load in the package is safetensors-only


def _without_line_numbers(found: list[str]) -> list[str]:
    return [re.sub(r":\d+:", ":", f) for f in found]


def test_no_code_path_unpickles_or_trusts_remote_code():
    found = _offenders(r"\btorch\.load\(|\bpickle\.loads?\(|\bjoblib\.load\(|\bdill\.|"
                       r"weights_only\s*=\s*False|use_safetensors\s*=\s*(False|None)|"
                       r"trust_remote_code\s*=")
    # every model from_pretrained call says use_safetensors=True (tokenizers and configs
    # have no weights)
    for p in SOURCES:
        text = p.read_text(encoding="utf-8")
        for m in re.finditer(r"(\w*(Model|For\w+))\.from_pretrained\(", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            if "use_safetensors=True" not in text[m.end():i]:
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{p.relative_to(ROOT)}:{line}: {text[m.start():i].strip()}")
    assert sorted(_without_line_numbers(found)) == sorted(PENDING), found


def _pickle_only(src: Path, dest: Path) -> Path:
    from safetensors.torch import load_file
    shutil.copytree(src, dest)
    torch.save(load_file(str(dest / "model.safetensors")), dest / "pytorch_model.bin")
    (dest / "model.safetensors").unlink()
    return dest


def test_a_pickle_only_checkpoint_is_refused_though_transformers_would_load_it(
        tmp_path, tiny_model_dir):
    from transformers import AutoModelForSequenceClassification
    folder = _pickle_only(tiny_model_dir, tmp_path / "pickled")
    assert AutoModelForSequenceClassification.from_pretrained(folder).config.num_labels == 5
    with pytest.raises(CheckpointError, match="only pickle weights.*loads only safetensors"):
        load_checkpoint(folder)
    with pytest.raises(CheckpointError, match="only pickle weights"):
        load_for_training(str(folder), FIVE)  # nor as a base model to fine-tune


class _Payload:
    """Unpickling this creates a file: what a hostile pytorch_model.bin could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_hostile_pickle_is_never_opened(tmp_path, tiny_model_dir):
    import pickle
    folder = tmp_path / "hostile"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "PWNED"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    for attempt in (lambda: load_checkpoint(folder), lambda: load_for_training(str(folder), FIVE)):
        with pytest.raises(CheckpointError):
            attempt()
    assert not marker.exists()


@pytest.mark.parametrize("model_type", ["bert", "evil-bert"])
def test_a_config_asking_for_remote_code_never_runs_it(tmp_path, tiny_model_dir, model_type):
    """auto_map points transformers at Python in the folder; without trust_remote_code
    it must never be imported: a known model type loads transformers' own class, an
    unknown one is refused."""
    folder = tmp_path / "remote"
    shutil.copytree(tiny_model_dir, folder)
    marker = tmp_path / "PWNED"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from transformers import BertConfig, BertForSequenceClassification\n"
        "class EvilConfig(BertConfig):\n    model_type = 'evil-bert'\n"
        "class EvilModel(BertForSequenceClassification):\n    config_class = EvilConfig\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type=model_type, auto_map={
        "AutoConfig": "evil.EvilConfig", "AutoModelForSequenceClassification": "evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(cfg))
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    tok_cfg["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    if model_type == "bert":
        from transformers import BertForSequenceClassification
        model, _, _ = load_checkpoint(folder)
        assert type(model) is BertForSequenceClassification
    else:
        with pytest.raises(CheckpointError):
            load_checkpoint(folder)
    assert not marker.exists()


def test_resume_state_is_safetensors_and_json_only():
    """The trainer's resume state (AdamW moments, RNG) is written without pickle."""
    import inspect

    from reviewbert.training import resume
    src = "".join(inspect.getsource(f) for f in (resume.save_training_state,
                                                 resume.load_training_state))
    assert "save_file" in src and "load_file" in src and "torch.save" not in src


# ------------------------------------------------------------------ 2. the server
def test_server_binds_localhost_with_xsrf_and_no_usage_statistics():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    server, browser = cfg["server"], cfg["browser"]
    assert server["address"] == "localhost"
    assert server["enableXsrfProtection"] is True
    assert server.get("enableCORS", True) is True          # Streamlit's default: on
    assert browser["gatherUsageStats"] is False
    assert server["maxUploadSize"] << 20 == D.MAX_UPLOAD_BYTES
    # and nothing that starts the app overrides those settings
    for f in [ROOT / "Makefile", *(ROOT / "scripts").glob("*")]:
        if f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
            assert not re.search(r"server\.address|0\.0\.0\.0|enableXsrfProtection|"
                                 r"gatherUsageStats|enableCORS", text), f


def test_streamlit_reads_those_settings(monkeypatch):
    """The file is the one Streamlit loads from the repository root (`make run`)."""
    from streamlit import config
    monkeypatch.chdir(ROOT)
    config.get_config_options(force_reparse=True)
    try:
        assert config.get_option("server.address") == "localhost"
        assert config.get_option("server.enableXsrfProtection") is True
        assert config.get_option("browser.gatherUsageStats") is False
    finally:
        config.get_config_options(force_reparse=True)


# --------------------------------------------------------- 3. launching: no shell
def test_no_code_path_uses_a_shell():
    assert _offenders(r"shell\s*=\s*True|\bos\.system\(|\bos\.popen\(|create_subprocess_shell|"
                      r"subprocess\.(getoutput|getstatusoutput)\(|\bpty\.spawn\(") == []


def _fake_python(tmp_path: Path) -> Path:
    """An executable that records the argv it was started with, then exits."""
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "open(os.environ['RB_ARGV_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


SHELLISH = ["; rm -rf ~", "$(touch {canary})", "`touch {canary}`", "a b|c && d > {canary}",
            "--resume", "\n--data /etc/passwd", "'\"\\"]


def test_launch_gives_every_value_as_one_argv_item(tmp_path, monkeypatch):
    canary = tmp_path / "CANARY"
    values = [v.format(canary=canary) for v in SHELLISH]
    out = tmp_path / "argv.json"
    monkeypatch.setenv("RB_ARGV_OUT", str(out))
    monkeypatch.setenv(R.QUEUE_DIR_ENV, str(tmp_path / ".queue"))
    args = [x for v in values for x in ("--text-column", v)]
    run = tmp_path / "run"
    proc = R.launch("train", args, run, python=str(_fake_python(tmp_path)))
    assert proc.wait(timeout=60) == 0
    assert json.loads(out.read_text()) == ["-m", "reviewbert", "train", *args, "--out", str(run)]
    assert not canary.exists()


def test_the_train_page_launch_puts_form_values_in_a_file_not_in_argv(tmp_path, monkeypatch,
                                                                      tiny_model_dir):
    """jobs.start_run (the Launch button): values go into train_config.json; argv holds
    only fixed flags and paths. Popen is recorded, then run with the fake python."""
    from reviewbert.training import jobs

    from toyreviews import write_toy_csv
    canary = tmp_path / "CANARY"
    out = tmp_path / "argv.json"
    monkeypatch.setenv("RB_ARGV_OUT", str(out))
    monkeypatch.setenv(R.QUEUE_DIR_ENV, str(tmp_path / ".queue"))
    fake, real_popen, calls = _fake_python(tmp_path), R.subprocess.Popen, []

    def recording_popen(cmd, *a, **kw):
        calls.append((list(cmd), kw))
        return real_popen([str(fake), *cmd[1:]], *a, **kw)

    monkeypatch.setattr(R.subprocess, "Popen", recording_popen)
    data = write_toy_csv(tmp_path / "data" / "toy.csv", n=20)
    values = {"data": [str(data)], "base_model": str(tiny_model_dir),
              "text_column": f"$(touch {canary})", "rating_column": "; rm -rf ~",
              "title_column": "`id`"}
    run, proc = jobs.start_run(values, tmp_path / "ckpts", "safe-run")
    assert proc.wait(timeout=60) == 0
    (cmd, kw), = calls
    assert not kw.get("shell") and isinstance(cmd, list)
    cfg_path = str(run / "train_config.json")
    assert json.loads(out.read_text()) == ["-m", "reviewbert", "train", "--config", cfg_path,
                                           "--out", str(run), "--queue"]
    saved = json.loads(Path(cfg_path).read_text())
    assert {k: saved[k] for k in ("text_column", "rating_column", "title_column")} == \
        {k: values[k] for k in ("text_column", "rating_column", "title_column")}
    assert not canary.exists()
    with pytest.raises(Exception, match="run name"):  # the folder name is checked too
        jobs.start_run(values, tmp_path / "ckpts", "../escape")


# ------------------------------------------------------------------- 4. uploads
@pytest.mark.parametrize("name", ["../../x.csv", "/etc/cron.d/x.csv", "..\\..\\x.csv",
                                  "a\x00b.csv", ".bashrc.csv", "%2e%2e/x.csv"])
def test_uploads_stay_in_their_folder(tmp_path, name):
    folder = tmp_path / "uploads"
    path = D.save_upload(name, b"Rating,Reviews\n5,fine\n", folder)
    assert path.parent == folder and not path.name.startswith(".") and "\x00" not in path.name
    assert sorted(tmp_path.rglob("*")) == [folder, path]


@pytest.mark.parametrize("name", ["x.csv\x00.exe", "../..", "/", "x.sh", ".csv", "\x00"])
def test_names_that_are_not_review_files_are_refused(tmp_path, name):
    with pytest.raises(D.UploadError):
        D.save_upload(name, b"Rating,Reviews\n5,fine\n", tmp_path)
    assert not any(tmp_path.iterdir())


def test_uploads_are_size_limited_before_and_after_decompression(tmp_path):
    import gzip
    with pytest.raises(D.UploadError, match="limit"):
        D.save_upload("r.csv", b"x" * 2000, tmp_path, max_bytes=1000)
    blob = gzip.compress(b"Rating,Reviews\n" + b"5,fine phone\n" * 1_000_000)  # 13 MB inside
    old = D.MAX_UPLOAD_EXPANDED
    D.MAX_UPLOAD_EXPANDED = 1 << 20
    try:
        with pytest.raises(D.UploadError, match="expands to over"):
            D.save_upload("r.csv.gz", blob, tmp_path)
    finally:
        D.MAX_UPLOAD_EXPANDED = old
    assert not any(tmp_path.iterdir())


def test_every_upload_widget_stores_through_save_upload():
    for p in [*(ROOT / "reviewbert" / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        text = p.read_text(encoding="utf-8")
        if "file_uploader" not in text:
            continue
        for line in text.splitlines():
            if ".getvalue()" in line or ".read()" in line:
                # or parsed in memory and never written: a CSV of behavioural cases goes to
                # read_cases_csv, which refuses more than 5 MB before parsing
                assert "save_upload(" in line or "read_cases_csv(" in line, \
                    f"{p.name}: {line.strip()}"


# ------------------------------------------------------------ 5. HTML escaping
TAG = re.compile(r"<\s*([a-zA-Z][\w-]*)")


def test_the_highlighted_review_is_escaped():
    from reviewbert.viz.highlight import highlight_html
    text = " ".join(HOSTILE)
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    out = highlight_html(text, spans, [0.5] * len(spans))
    assert set(TAG.findall(out)) <= {"div", "span", "br"}, out
    assert "&lt;script&gt;" in out and "onerror=alert" in out  # shown, as text


def test_token_chips_are_escaped():
    from reviewbert.anatomy.figures import token_chips_html
    out = token_chips_html(HOSTILE, list(range(len(HOSTILE))), [False] * len(HOSTILE))
    assert set(TAG.findall(out)) <= {"div", "span", "br"}, out


def test_the_head_view_cannot_close_its_script(tiny_model_dir):
    import dataclasses

    from reviewbert.model.inference import Predictor
    from reviewbert.viz.bertviz_view import head_view_html
    pred = Predictor.from_checkpoint(tiny_model_dir).predict("a b c d e f")
    plain = head_view_html(pred)
    n = len(pred.tokens)
    hostile = dataclasses.replace(pred, tokens=["[CLS]", *(HOSTILE * n)[:n - 2], "[SEP]"])
    out = head_view_html(hostile)
    for tag in ("<script", "</script", "<img", "<svg", "<iframe"):
        assert out.lower().count(tag) == plain.lower().count(tag), tag


def test_the_predict_page_shows_hostile_text_as_text(monkeypatch, tmp_path, tiny_model_dir):
    from streamlit.testing.v1 import AppTest

    from browser_support import write_meta
    ckpt = tmp_path / "ckpts" / "demo"
    shutil.copytree(tiny_model_dir, ckpt)
    write_meta(ckpt, 5)
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(tmp_path / "ckpts"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.text_area(key="review_text").input(" ".join(HOSTILE))
    at.button(key="predict_btn").click()
    at.run()
    assert not at.exception, at.exception
    html_parts = [str(m.value) for m in [*at.markdown, *at.html] if "<" in str(m.value)]
    assert any("&lt;" in h and "onerror" in h for h in html_parts)  # the highlight view drew it
    for h in html_parts:
        assert not re.search(r"<\s*(script|img|svg|iframe)", h, re.I), h
