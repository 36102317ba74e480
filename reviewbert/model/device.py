"""Where and in what precision the model runs, and how many CPU threads each process takes.

- **Device**: CUDA, then Apple's MPS, then the CPU (:func:`pick_device`).
- **Precision**: bulk evaluation and training use bf16 autocast only where it is measured
  faster at the same accuracy: a CPU with bf16 matrix units (AMX-BF16 or AVX512-BF16,
  read from /proc/cpuinfo at run time) or a CUDA GPU that supports bf16; fp32 elsewhere,
  where bf16 is emulated and slower (:func:`resolve_precision`,
  :func:`resolve_mixed_precision`).
- **Threads**: a training run started from the app leaves a core to the app, at a lower
  priority (:func:`set_training_threads`); a bulk pass beside a training run takes one
  thread fewer (:func:`cpu_threads`, :func:`threads_beside_training`), and the app's work
  on one review half the cores (:func:`threads_for_one_review`).

torch is imported by the functions that use it, not by the module: the app's frame
imports this module (through the checkpoint list) before its first paint, and torch's
import is a wait that the page should not make.
"""
from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from reviewbert.config import PRECISIONS

if TYPE_CHECKING:
    import torch

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
LAUNCHED_ENV = "REVIEWBERT_LAUNCHED"  # set for children of runs.launch: they leave room for the app


# --------------------------------------------------------------------- device
def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA, then MPS, then CPU. ``prefer`` ("cpu", "cuda", "mps") overrides."""
    import torch
    if prefer:
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> str:
    import torch
    if device.type == "cuda":
        return f"CUDA GPU ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return f"CPU ({torch.get_num_threads()} threads)"


@functools.lru_cache(maxsize=1)
def cpu_bf16_units(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The bf16 matrix features this CPU advertises (e.g. ``("avx512_bf16",)``); () if none
    or unknown (no /proc/cpuinfo: macOS, Windows). ``torch.backends.cpu.get_cpu_capability()``
    says "AVX512" on CPUs with and without bf16, so the kernel's flags decide."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return ()
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
            break  # every core lists the same flags
    return tuple(f for f in BF16_CPU_FLAGS if f in flags)


def cpu_description(cpuinfo: str = "/proc/cpuinfo") -> str:
    """This CPU in words, for reports of how long something took: cores, model and bf16
    units (they decide bf16's speed), as ``"<cores>-core <model name> (<bf16 units>)"``."""
    import platform
    model = platform.processor() or platform.machine()
    try:
        for line in Path(cpuinfo).read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    units = ", ".join(cpu_bf16_units(cpuinfo)) or "no bf16 units"
    return f"{os.cpu_count()}-core {model} ({units})"


# ------------------------------------------------------------------ precision
def resolve_precision(precision: str, device) -> str:
    """Bulk evaluation: "auto" -> "bf16" on a CPU with bf16 units, else "fp32";
    "bf16"/"fp32" as given."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    import torch
    return "bf16" if torch.device(device).type == "cpu" and cpu_bf16_units() else "fp32"


def resolve_mixed_precision(mixed_precision: str, device) -> str:
    """Training: ``"auto"`` → ``"bf16"`` where bf16 autocast is measured faster at the same
    accuracy: a CPU with AMX-BF16 or AVX512-BF16 units (bench/train_precision.py times a
    step both ways; the model card's ablation table gives the demo recipe's accuracy both
    ways) or a CUDA GPU that supports bf16; ``"no"`` (fp32) elsewhere, where bf16 is emulated on a CPU and
    slower. Any other value is returned as given."""
    if mixed_precision != "auto":
        return mixed_precision
    import torch
    device = torch.device(device)
    if device.type == "cpu":
        return "bf16" if cpu_bf16_units() else "no"
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "no"
    return "no"


def describe_mixed_precision(accelerator) -> str:
    """"bf16 autocast", and on a CPU whether it has bf16 units (else bf16 is emulated)."""
    mp = accelerator.mixed_precision
    if mp != "bf16" or accelerator.device.type != "cpu":
        return f"{mp} autocast"
    units = cpu_bf16_units()
    if units:
        return f"bf16 autocast ({', '.join(u.upper().replace('_', '-') for u in units)})"
    return "bf16 autocast (emulated: no AMX-BF16/AVX512-BF16 on this CPU, likely slower than fp32)"


# ----------------------------------------------------------------------- CUDA
def prepare_cuda(device) -> None:
    """Process-wide settings for ReviewBERT's work on a CUDA ``device`` (nothing elsewhere).

    cuDNN's backend for ``scaled_dot_product_attention``, PyTorch's first choice on Hopper,
    builds a graph for every new sequence length it meets, and a build costs many times
    the step it serves. Dynamic padding over length-grouped batches meets a new length at
    almost every step of a first epoch, so with that backend ReviewBERT's bf16 training
    was several times slower than without it, and slower than HF Trainer's
    (``bench/gpu_check.py`` measures both ways). The flash and memory-efficient kernels,
    next in PyTorch's order, need no such build.
    """
    import torch
    if torch.device(device).type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


# -------------------------------------------------------------------- threads
def set_training_threads(accelerator) -> None:
    """On CPU, give each training process its share of the cores, unless OMP_NUM_THREADS
    says otherwise (torchrun sets it to 1 per process, which is right there too).

    A run started by ``runs.launch`` (the training page), alone on a CPU, leaves
    room for the app beside it: nice +10 and one core fewer
    (REVIEWBERT_TRAIN_NICE / REVIEWBERT_TRAIN_THREADS override), so that a
    prediction on the main page stays close to its idle time
    (bench/predict_while_training.py measures how close).
    """
    if accelerator.device.type != "cpu":
        return
    import torch
    cores = usable_cores()
    background = os.environ.get(LAUNCHED_ENV) == "1" and accelerator.num_processes == 1 \
        and int(os.environ.get("WORLD_SIZE", "1")) == 1
    if background:
        lower_priority(int(os.environ.get("REVIEWBERT_TRAIN_NICE", "10")))
        threads = os.environ.get("REVIEWBERT_TRAIN_THREADS") or \
            os.environ.get("OMP_NUM_THREADS") or max(1, cores - 1)
        torch.set_num_threads(max(1, int(threads)))
        # the tokenizers' Rust pool (tokenizing the data) reads this when it starts
        os.environ.setdefault("RAYON_NUM_THREADS", str(torch.get_num_threads()))
        return
    if os.environ.get("OMP_NUM_THREADS"):
        return
    local = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    torch.set_num_threads(max(1, cores // max(1, local)))


def lower_priority(nice: int) -> None:
    """Add ``nice`` to every thread of this process, and put them in Linux's SCHED_IDLE
    class (unless REVIEWBERT_TRAIN_SCHED=normal). Linux keeps both per thread (new
    threads inherit their creator's), so os.nice() alone would leave threads started
    earlier (tqdm's monitor, a thread pool) at full priority.

    Why SCHED_IDLE and not nice alone: a prediction runs an OpenMP region on every core
    and waits at its barriers for its slowest thread. With nice +10, the thread that
    shares a core with training still waits for the scheduler's time slice, and a
    prediction took many times its idle time (bench/predict_while_training.py); a
    SCHED_IDLE thread yields its core at once.
    """
    if nice <= 0:
        return
    idle = os.environ.get("REVIEWBERT_TRAIN_SCHED", "idle") == "idle" and hasattr(os, "SCHED_IDLE")
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            cur = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, cur + nice))
            if idle:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass  # the thread ended meanwhile


_threads_lock = threading.Lock()
_threads_users = 0                  # cpu_threads blocks running now, in any thread
_threads_base: int | None = None    # torch's thread count before the first of them


@contextmanager
def cpu_threads(n: int | None):
    """Run the block with ``n`` torch threads (None: unchanged), then restore.

    Why: a prediction's OpenMP region waits at its barriers for its slowest thread;
    while a background training holds one of the cores, a thread scheduled there makes
    a prediction several times slower than idle even with the trainer in SCHED_IDLE.
    One thread fewer, only while a run trains, keeps it near its idle time
    (bench/predict_while_training.py).

    torch's thread count is per process (a new thread, such as the one Streamlit runs
    each script in, starts with the last value set). Concurrent sessions therefore
    share one count: the first block in saves the count, the last one out restores
    it. (Saving and restoring per block let overlapping blocks leave the process at
    one thread for good: bench/load.py found it.)
    """
    global _threads_users, _threads_base
    if not n:
        yield
        return
    import torch
    with _threads_lock:
        if _threads_users == 0:
            _threads_base = torch.get_num_threads()
        _threads_users += 1
        torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_base)


def threads_for_one_review(busy: bool) -> int:
    """The thread count for the app's work on one review (a prediction, its explanations,
    its what-if edits): half the cores (one of two), one fewer than that while a
    run trains on the CPU.

    Why not every core: the server's parallelism is its sessions, and one review's
    OpenMP regions are short. In the app server, a forward pass on every core waits at
    OpenMP barriers (its softmax) for a core that the event loop, another session or the
    browser holds, and it took longer than on fewer threads; fewer threads also cut the
    server's CPU per Predict click (spinning OpenMP threads included), which
    bench/first_second.py measures (``server_cpu_ms_256``)."""
    return max(1, _threads_before_blocks() // 2 - (1 if busy else 0))


def threads_beside_training(busy: bool) -> int | None:
    """The thread count for a prediction: one core fewer while a run trains on the CPU
    (fewer than the count before any :func:`cpu_threads` block lowered it)."""
    if not busy:
        return None
    return max(1, _threads_before_blocks() - 1)


def _threads_before_blocks() -> int:
    """torch's thread count before any :func:`cpu_threads` block lowered it."""
    import torch
    with _threads_lock:
        return _threads_base if _threads_users else torch.get_num_threads()
