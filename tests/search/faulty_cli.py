"""``autotune`` with the faulty engine (faulty_engine.py) in place of the embedded one, for the tests
that kill a real ``autotune tune`` process: ``python faulty_cli.py tune ARGS...``; the plan comes from
``FAULTY_ENGINE_PLAN`` as in faulty_engine.py."""

from __future__ import annotations

import faulty_engine
from autotune.cli import main
from autotune.engines.embedded import adapter

if __name__ == "__main__":
    adapter.FACTORY = faulty_engine.FACTORY
    for module, name, value in faulty_engine.parent_readings():
        setattr(module, name, value)
    main()
