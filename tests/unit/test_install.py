"""The package installs: `pip install -e .` in a new virtual environment gives a working
`reviewbert` command, the same command line as `python -m reviewbert`.

Offline: the new environment sees the project's installed dependencies through a .pth file
(nothing is downloaded), and pip builds without isolation with the setuptools found there.
A full fresh install from PyPI (torch first, then `pip install -e .`) is in the README.
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_editable_gives_the_reviewbert_command(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                              "--no-index", "-e", str(ROOT)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    command = env_dir / "bin" / "reviewbert"
    assert command.exists()
    # run from elsewhere: the installed package, not the current folder, answers
    top = subprocess.run([command, "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    for sub in ("train", "evaluate", "predict", "export", "search", "faithfulness", "report",
                "card"):
        assert sub in top.stdout
    via_command = subprocess.run([command, "train", "--help"], capture_output=True, text=True,
                                 cwd=tmp_path)
    via_module = subprocess.run([sys.executable, "-m", "reviewbert", "train", "--help"],
                                capture_output=True, text=True, cwd=ROOT)
    assert via_command.returncode == 0 and via_command.stdout == via_module.stdout
    where = subprocess.run([py, "-c", "import reviewbert; print(reviewbert.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert Path(where.strip()).resolve() == (ROOT / "reviewbert" / "__init__.py").resolve()
