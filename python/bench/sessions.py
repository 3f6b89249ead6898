"""Many sessions from one Python process, against bwrap running the same commands.

Prints, for cordon (the binary ``cordon.find_binary()`` finds: the package's, or
``$CORDON_BIN``) and for bubblewrap as the baseline:

- the time from ``Session()`` to the first answer (a ``bash("true")``), one session alone,
  and for each of 100 sessions started at once;
- calls per second with every session calling at once, on this machine's cores (``bash`` and
  ``read_file``; bwrap runs ``bash -c true`` once per call, the same number at a time);
- the memory of an idle session: the RSS and PSS of cordon and its helpers summed over the
  process tree, per session (bwrap: ``bwrap … sleep infinity``, with bwrap itself);
- the time to end the 100 sessions, checked to leave nothing running.

    python python/bench/sessions.py [--sessions 100] [--seconds 5]

bwrap is in the ``bubblewrap`` package (``apt-get install bubblewrap``); without it the
baseline rows are left out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import cordon
from cordon import procs

SETTINGS: cordon.Options = {"bash_home": "private", "log_level": "warn"}


def bwrap(workspace: Path, *command: str) -> list[str]:
    """bwrap's command line for ``command`` in a sandbox like cordon's: namespaces of its own
    (user, pid, mount, network, ipc, uts, cgroup), the system read-only, the workspace
    writable, a private /tmp."""
    return [
        "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--bind", str(workspace), str(workspace), "--chdir", str(workspace),
        *command,
    ]  # fmt: skip


def timed(work: Callable[[], object]) -> float:
    """Seconds ``work`` took."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def memory(pids: Sequence[int]) -> tuple[int, int]:
    """The RSS and PSS (KiB) of the process trees of ``pids``, summed."""
    rss = pss = 0
    for root in pids:
        for pid, _ in procs.tree(root):
            try:
                with open(f"/proc/{pid}/smaps_rollup") as file:
                    for line in file:
                        name, _, value = line.partition(":")
                        if name == "Rss":
                            rss += int(value.split()[0])
                        elif name == "Pss":
                            pss += int(value.split()[0])
            except OSError:
                pass
    return rss, pss


def rate(workers: Sequence[Callable[[], object]], seconds: float) -> float:
    """Calls per second, with each of ``workers`` calling in a loop of its own at once."""
    stop = threading.Event()
    counts = [0] * len(workers)

    def loop(index: int) -> None:
        while not stop.is_set():
            workers[index]()
            counts[index] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(workers))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def ms(values: Sequence[float]) -> str:
    """Median and 90th percentile, in milliseconds."""
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{statistics.median(ordered) * 1000:.1f} ms (p90 {p90 * 1000:.1f})"


def row(what: str, value: str, baseline: str = "") -> None:
    print(f"| {what} | {value} | {baseline} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--alone", type=int, default=20, help="single-session starts timed")
    args = parser.parse_args()
    has_bwrap = shutil.which("bwrap") is not None
    root = Path(tempfile.mkdtemp(prefix="cordon-bench-"))
    workspaces = [root / f"ws{n}" for n in range(args.sessions)]
    for path in workspaces:
        path.mkdir()
        (path / "a.txt").write_text("one\ntwo\n")

    print(f"cordon: {cordon.find_binary()}; {os.cpu_count()} cores; {args.sessions} sessions")
    print("| measure | cordon | bwrap (same commands) |")
    print("|---|---|---|")

    def first_answer(path: Path) -> tuple[cordon.Session, float]:
        started = time.perf_counter()
        s = cordon.Session(path, **SETTINGS)
        s.bash("true")
        return s, time.perf_counter() - started

    def one_alone() -> float:
        s, took = first_answer(workspaces[0])
        s.close()
        return took

    alone = [one_alone() for _ in range(args.alone)]
    bwrap_alone = [
        timed(lambda: subprocess.run(bwrap(workspaces[0], "bash", "-c", "true"), check=True))
        for _ in range(args.alone if has_bwrap else 0)
    ]
    row("`Session()` to the first answer, alone", ms(alone), ms(bwrap_alone) if has_bwrap else "")

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.sessions) as pool:
        opened = list(pool.map(first_answer, workspaces))
    all_started = time.perf_counter() - started
    sessions = [s for s, _ in opened]
    row(
        f"`Session()` to the first answer, {args.sessions} at once",
        f"{ms([t for _, t in opened])}; all in {all_started:.2f} s",
    )

    bash = rate([partial(s.bash, "true") for s in sessions], args.seconds)
    files = rate([partial(s.read_file, "a.txt") for s in sessions], args.seconds)
    runs = [partial(subprocess.run, bwrap(p, "bash", "-c", "true"), check=True) for p in workspaces]
    bwrap_rate = rate(runs, args.seconds) if has_bwrap else 0.0
    row("calls per second, `bash true`", f"{bash:.0f}", f"{bwrap_rate:.0f}" if has_bwrap else "")
    row("calls per second, `read_file`", f"{files:.0f}")

    time.sleep(0.5)
    rss, pss = memory([s.pid for s in sessions if s.pid is not None])
    idle = []
    if has_bwrap:
        idle = [
            subprocess.Popen(bwrap(p, "sleep", "infinity"), stdin=subprocess.DEVNULL)
            for p in workspaces
        ]
        time.sleep(0.5)
    bwrap_rss, bwrap_pss = memory([p.pid for p in idle])
    n = args.sessions
    row(
        "memory per idle session (RSS / PSS of the process tree)",
        f"{rss / n / 1024:.1f} / {pss / n / 1024:.1f} MiB",
        f"{bwrap_rss / n / 1024:.1f} / {bwrap_pss / n / 1024:.1f} MiB" if has_bwrap else "",
    )
    for process in idle:
        process.kill()
        process.wait()

    trees = set().union(*(procs.tree(s.pid) for s in sessions if s.pid is not None))
    with ThreadPoolExecutor(max_workers=args.sessions) as pool:
        ended = timed(lambda: list(pool.map(cordon.Session.close, sessions)))
    left = procs.alive(trees)
    row(f"ending the {n} sessions", f"{ended:.2f} s; {len(left)} processes left")
    shutil.rmtree(root)
    if not has_bwrap:
        print("bwrap is not installed (apt-get install bubblewrap): no baseline")


if __name__ == "__main__":
    main()
