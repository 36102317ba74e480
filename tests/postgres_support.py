"""A throwaway PostgreSQL server for the distributed search tests (``make distributed``).

``initdb`` in a temporary folder, ``postgres`` listening on 127.0.0.1 only (a free port;
its unix socket in the same folder), trust authentication for the one role ``rb``,
a database ``reviewbert``. PostgreSQL refuses to run as root, so under root the server
runs as Debian's ``postgres`` user (the package creates it) and owns the folder.
``stop()`` ends the server and removes the folder, whatever happened before.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from browser_support import free_port

ROLE, DATABASE = "rb", "reviewbert"


def bin_dir() -> Path | None:
    """Debian's /usr/lib/postgresql/VERSION/bin (the newest), else the one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    def __init__(self):
        self.bin = bin_dir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed: run `make distributed` "
                               "(scripts/ensure-postgresql.sh installs Debian's postgresql)")
        self.user = "postgres" if os.geteuid() == 0 else None
        self.folder = Path(tempfile.mkdtemp(prefix="reviewbert-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.url = f"postgresql://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *cmd, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / cmd[0]), *map(str, cmd[1:])], check=True,
                              capture_output=True, text=True, user=self.user, timeout=120, **kw)

    def start(self) -> "PostgresServer":
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        self._run("initdb", "-D", self.data, "-U", ROLE, "--auth=trust", "-E", "UTF8",
                  "--no-locale", "--no-sync")
        log = open(self.folder / "server.log", "w")
        if self.user:
            shutil.chown(log.name, self.user, self.user)
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
             "-k", str(self.folder), "-c", "listen_addresses=127.0.0.1",
             "-c", "fsync=off", "-c", "max_connections=60"],
            stdout=log, stderr=subprocess.STDOUT, user=self.user, start_new_session=True)
        log.close()
        deadline = time.time() + 60
        while subprocess.run([str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p",
                              str(self.port)], capture_output=True).returncode != 0:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("PostgreSQL did not start: " + self.log_tail())
            time.sleep(0.2)
        self._run("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", ROLE, DATABASE)
        return self

    def log_tail(self) -> str:
        try:
            return (self.folder / "server.log").read_text()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL after 30 s; then the folder goes."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(2)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, 9)
                    self.proc.wait(10)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
