"""A real PostgreSQL server for the index tests and benchmarks, from Debian's ``postgresql``
package binaries (/usr/lib/postgresql/<major>/bin): initdb into a temporary folder, started with
pg_ctl on a free port of 127.0.0.1, password authentication over TCP, stopped and removed after.

PostgreSQL refuses to run as root (its postmaster exits: "root execution of the PostgreSQL
server is not permitted"), so under root (CI) the server runs as the unprivileged ``nobody``,
through util-linux's ``setpriv``, in a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import free_port

USER = "crashlab"
PASSWORD = "index-test-secret"  # a test server's, on 127.0.0.1 only; tests check it never shows


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


class PostgresServer:
    def __init__(self, bin_dir: Path, durable: bool = False):
        self.bin_dir = bin_dir
        self.port = free_port()
        root = os.geteuid() == 0
        # under root, in /tmp itself: the test session's own temporary folders are root's alone
        self.folder = Path(tempfile.mkdtemp(prefix="crashlab-pg-", dir="/tmp" if root else None))
        self.data = self.folder / "data"
        self.durable = durable
        self._as = []
        self._owner = None
        if root:
            nobody = pwd.getpwnam("nobody")
            self._owner = (nobody.pw_uid, nobody.pw_gid)
            self._as = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                        "--clear-groups", "--"]

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, timeout=120, cwd=self.folder,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
        if done.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed: {done.stderr.decode()[-2000:]}")

    def start(self) -> PostgresServer:
        password_file = self.folder / "password"
        password_file.write_text(PASSWORD + "\n")
        if self._owner:
            os.chmod(self.folder, 0o755)
            os.chown(self.folder, *self._owner)
            os.chown(password_file, *self._owner)
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", USER,
                  f"--pwfile={password_file}", "--auth-local=trust", "--auth-host=scram-sha-256",
                  "-E", "UTF8", "--no-locale", "--no-sync")
        # without durability the tests run faster; the benchmark asks for a server as shipped
        settings = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 " \
                   "-c max_connections=200"
        if not self.durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.folder / "server.log"), "-o", settings, "-w", "-t", "60", "start")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
