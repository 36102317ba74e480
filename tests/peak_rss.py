"""Run a module (like ``python -m``) or a script, then write its peak RSS and time as JSON.

    python tests/peak_rss.py OUT.json -m MODULE [ARGS ...]
    python tests/peak_rss.py OUT.json SCRIPT.py [ARGS ...]

OUT.json: {"peak_mb" (this process's own peak RSS), "seconds" (wall), "code" (exit
status)}. stdout/stderr pass through.

The peak is VmHWM from /proc/self/status, not ru_maxrss: Linux carries a forking
parent's RSS high-water mark over exec into the child's ru_maxrss, so a child
of a big pytest process would report the parent's size.
"""
import json
import resource
import runpy
import sys
import time


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


out, *rest = sys.argv[1:]
module = rest[0] == "-m"
target, args = (rest[1], rest[2:]) if module else (rest[0], rest[1:])
sys.argv = [target, *args]
t0, code = time.time(), 0
try:
    if module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if not isinstance(e.code, (int, type(None))):
        print(e.code, file=sys.stderr)
except BaseException:
    code = 1
    raise
finally:
    with open(out, "w") as f:
        json.dump({"peak_mb": _peak_mb(),
                   "seconds": round(time.time() - t0, 2), "code": code}, f)
sys.exit(code)
