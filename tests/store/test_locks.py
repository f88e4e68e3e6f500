"""The named database lock excludes other holders (threads here; processes and machines alike)."""

from __future__ import annotations

import threading
import time

from autotune.store import open_database
from autotune.store.locks import lock_key, named_lock


def test_a_second_holder_waits_for_the_first(db_url) -> None:
    events: list[str] = []
    first_holds = threading.Event()
    with open_database(db_url) as database:

        def first() -> None:
            with named_lock(database.engine, "study-a"):
                events.append("first in")
                first_holds.set()
                time.sleep(0.5)
                events.append("first out")

        def second() -> None:
            first_holds.wait()
            with named_lock(database.engine, "study-a"):
                events.append("second in")

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert events == ["first in", "first out", "second in"]


def test_lock_keys_are_stable_signed_64_bit_integers() -> None:
    assert lock_key("tiny") == lock_key("tiny") != lock_key("tiny2")
    assert -(2**63) <= lock_key("tiny") < 2**63
