"""``map_concurrently``: order, errors, and work while the interpreter shuts down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from txlake.storage.threads import map_concurrently


def test_results_come_in_item_order_from_several_threads() -> None:
    seen: set[int] = set()
    gate = threading.Barrier(4, timeout=30)

    def square(n: int) -> int:
        if n < 4:
            gate.wait()  # four calls at once, or this times out
        seen.add(threading.get_ident())
        return n * n

    assert map_concurrently(square, range(10), max_workers=4) == [n * n for n in range(10)]
    assert len(seen) > 1


def test_the_first_failing_item_raises() -> None:
    def check(n: int) -> int:
        if n in (3, 5):
            raise ValueError(f"bad {n}")
        return n

    with pytest.raises(ValueError, match="bad 3"):
        map_concurrently(check, range(8), max_workers=3)


def test_one_item_runs_on_the_calling_thread() -> None:
    assert map_concurrently(lambda _: threading.get_ident(), [0], max_workers=8) == [threading.get_ident()]
    assert map_concurrently(lambda n: n, [], max_workers=8) == []


def test_calls_run_one_after_another_while_the_interpreter_shuts_down() -> None:
    script = textwrap.dedent(
        """
        import atexit, threading
        from concurrent.futures import ThreadPoolExecutor
        from txlake.storage.threads import map_concurrently

        @atexit.register
        def last_words():
            try:
                ThreadPoolExecutor(2).submit(print)
            except RuntimeError:
                pass
            else:
                raise AssertionError("the executor took work at shutdown: this test no longer tests anything")
            me = threading.get_ident()
            assert map_concurrently(lambda n: (n, threading.get_ident()), range(5), max_workers=4) == [
                (n, me) for n in range(5)
            ]
            print("done")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "done", "")
