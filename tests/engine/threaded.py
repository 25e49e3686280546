"""Calls made from several threads at once, for the engine's "never mixed" promise."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(call: Callable[[int], None], n: int, timeout_s: float) -> None:
    """Run ``call(0)`` ... ``call(n - 1)`` in ``n`` threads at once and wait for all; a thread
    still running after ``timeout_s`` fails, and the first error a call raised is raised here."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            call(i)
        except BaseException as error:  # reported below, in the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    assert not any(thread.is_alive() for thread in threads), f"a call ran past {timeout_s} s"
    if errors:
        raise errors[0]
