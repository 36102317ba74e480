"""reviewbert.server.allocator: a fixed glibc mmap threshold, so big blocks go back to the system.

Each case runs in a fresh interpreter: the threshold is per process and cannot be
unset. The probe frees a 24 MB block (glibc's dynamic threshold then rises to 24 MB),
then asks for a 6 MB block and reads ``mallinfo2().hblkhd``, the bytes malloc holds in
mappings of their own: with the fix the 6 MB block is one of them (and its pages go
back on ``free``); with glibc's default it is carved out of the heap.
"""
from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

from reviewbert.server import allocator

PROBE = r"""
import ctypes, ctypes.util, json, sys
from reviewbert.server import allocator
ok = allocator.fix_mmap_threshold() if sys.argv[1] == "fix" else None
again = allocator.fix_mmap_threshold() if sys.argv[1] == "fix" else None
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
big = libc.malloc(24 << 20)
ctypes.memset(big, 1, 24 << 20)
libc.free(big)
before = libc.mallinfo2().hblkhd
block = libc.malloc(6 << 20)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
after_free = libc.mallinfo2().hblkhd - before
small = libc.malloc(2 << 20)
mapped_small = libc.mallinfo2().hblkhd - before
libc.free(small)
print(json.dumps({"ok": ok, "again": again, "mapped": mapped, "after_free": after_free,
                  "mapped_small": mapped_small}))
"""


def glibc_with_mallinfo2() -> bool:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.gnu_get_libc_version and libc.mallinfo2)
    except (OSError, AttributeError, TypeError):
        return False


pytestmark = pytest.mark.skipif(not glibc_with_mallinfo2(), reason="glibc >= 2.33 only")


def probe(mode: str) -> dict:
    import json
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_with_the_fix_a_6mb_block_is_mapped_and_given_back():
    r = probe("fix")
    assert r["ok"] is True and r["again"] is True      # accepted once; the second call is a no-op
    assert r["mapped"] >= 6 << 20                       # its own mapping
    assert r["after_free"] == 0                          # unmapped on free: RSS goes down


def test_without_it_glibc_raises_the_threshold_and_the_block_comes_from_the_heap():
    r = probe("default")
    assert r["mapped"] == 0     # what the app server did before: the probe can tell them apart


def test_blocks_under_the_threshold_stay_in_the_arenas():
    # a 256-token review's activations (up to 1.5 MB): no fresh pages for each of them
    assert 2 << 20 < allocator.MMAP_THRESHOLD
    assert probe("fix")["mapped_small"] == 0


ARENAS = r"""
import ctypes, ctypes.util, os, sys, tempfile, threading
from reviewbert.server import allocator
ok = allocator.limit_arenas(2) if sys.argv[1] == "limit" else None
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
barrier = threading.Barrier(9)
def work():
    block = libc.malloc(4096)        # a new thread's first malloc picks its arena
    barrier.wait()
    barrier.wait()
    libc.free(block)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
barrier.wait()
path = os.path.join(tempfile.mkdtemp(), "info.xml")
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
barrier.wait()
for t in threads:
    t.join()
print(ok, open(path).read().count("<heap nr="))
"""


def arenas(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", ARENAS, mode], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    ok, n = out.stdout.split()
    return ok, int(n)


def test_eight_threads_share_two_arenas_once_limited():
    """glibc gives each new thread an arena of its own (up to 8 per core); the app server
    runs every script run in a new thread. Limited, eight threads use at most two."""
    _, default = arenas("default")
    ok, limited = arenas("limit")
    assert default > 2, default              # the probe does make arenas
    assert ok == "True" and limited <= 2, (ok, limited)
