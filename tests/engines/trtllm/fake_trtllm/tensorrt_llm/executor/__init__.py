"""The stand-in's executor side: the streamed results (result.py) and the simulated engine that
produces them (engine.py)."""
