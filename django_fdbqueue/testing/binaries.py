"""Where FoundationDB's programs and client library are on this machine.

FoundationDB is not on PyPI: its packages (``foundationdb-server``, ``foundationdb-clients``) put
``fdbserver`` in ``/usr/sbin``, ``fdbcli`` in ``/usr/bin`` and ``libfdb_c.so`` in ``/usr/lib``.
A build or an unpacked release elsewhere is found through ``FDB_HOME`` (a folder with ``bin/``
and ``lib/``). Only the standard library is used, so the cluster script runs before any install.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

FDB_HOME = "FDB_HOME"
LIBRARY_NAME = "libfdb_c.so"
SYSTEM_SERVER = ("/usr/sbin/fdbserver", "/usr/local/sbin/fdbserver")
SYSTEM_CLI = ("/usr/bin/fdbcli", "/usr/local/bin/fdbcli")
SYSTEM_LIBRARY = ("/usr/lib/libfdb_c.so", "/usr/lib64/libfdb_c.so", "/usr/local/lib/libfdb_c.so")


class BinariesNotFound(RuntimeError):
    """No usable fdbserver/fdbcli (or client library): the message lists every place looked."""


@dataclass(frozen=True)
class Binaries:
    fdbserver: str
    fdbcli: str
    library: str | None  # None: the dynamic loader's default search will have to find it


def _executable(path: str | os.PathLike[str]) -> str | None:
    path = os.fspath(path)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _first(candidates: list[str], check: Callable[[str], object]) -> str | None:
    for candidate in candidates:
        if check(candidate):
            return candidate
    return None


def candidates(home: str | None = None) -> dict[str, list[str]]:
    """The places looked at for each file, in order: FDB_HOME first, then PATH, then the packages'."""
    home = home if home is not None else os.environ.get(FDB_HOME) or None
    server: list[str] = []
    cli: list[str] = []
    library: list[str] = []
    if home:
        base = Path(home)
        server += [str(base / "bin" / "fdbserver"), str(base / "sbin" / "fdbserver")]
        cli.append(str(base / "bin" / "fdbcli"))
        library += [str(base / "lib" / LIBRARY_NAME), str(base / "lib64" / LIBRARY_NAME)]
    for name, places in (("fdbserver", server), ("fdbcli", cli)):
        found = shutil.which(name)
        if found:
            places.append(found)
    server += list(SYSTEM_SERVER)
    cli += list(SYSTEM_CLI)
    library += list(SYSTEM_LIBRARY)
    return {"fdbserver": server, "fdbcli": cli, "library": library}


def find(home: str | None = None, *, need_library: bool = False) -> Binaries:
    """The first usable fdbserver, fdbcli and client library; BinariesNotFound says what was tried."""
    places = candidates(home)
    server = _first(places["fdbserver"], _executable)
    cli = _first(places["fdbcli"], _executable)
    library = _first(places["library"], os.path.isfile)
    missing = [name for name, found in (("fdbserver", server), ("fdbcli", cli)) if found is None]
    if need_library and library is None:
        missing.append(LIBRARY_NAME)
    if missing:
        looked = "; ".join(
            f"{name}: {', '.join(places[key])}"
            for name, key in (("fdbserver", "fdbserver"), ("fdbcli", "fdbcli"), (LIBRARY_NAME, "library"))
        )
        raise BinariesNotFound(
            f"FoundationDB's {' and '.join(missing)} not found. Looked at {looked}. Install "
            f"FoundationDB's packages (foundationdb-server and foundationdb-clients), or set "
            f"{FDB_HOME} to a folder with bin/fdbserver, bin/fdbcli and lib/{LIBRARY_NAME}."
        )
    assert server is not None and cli is not None
    return Binaries(server, cli, library)


def available(home: str | None = None) -> bool:
    """Can a local cluster be started here (and a client reach it)?"""
    try:
        find(home, need_library=True)
    except BinariesNotFound:
        return False
    return True


def main() -> int:
    """``python -m django_fdbqueue.testing.binaries``: print the client library's path, or why not."""
    import sys

    try:
        print(find(need_library=True).library)
    except BinariesNotFound as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
