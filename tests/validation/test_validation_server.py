"""The server process: started in a group of its own, refused on a port in use, given up on when it
exits or misses its start timeout, and always stopped with everything it started (a child that
ignores SIGTERM included). Real processes, no vLLM: the scripts are small bash servers."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from autotune.errors import ConfigurationError, EngineError
from autotune.validation.server import HOST, Server, check_port_free, free_port

# A script that starts a child which ignores SIGTERM (as a stuck engine core might), writes the
# child's pid, then serves /health as the exported script's "$@" asks (--host H --port P).
HEALTHY = f"""#!/usr/bin/env bash
bash -c 'trap "" TERM; while true; do sleep 1; done' &
echo $! > "$(dirname "$0")/child.pid"
exec {sys.executable} -c '
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"vllm:spec_decode_num_drafts_total 3.0\\n" if self.path == "/metrics" else b"ok"
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args): pass
http.server.HTTPServer((sys.argv[2], int(sys.argv[4])), Health).serve_forever()' "$@"
"""
NEVER_READY = """#!/usr/bin/env bash
bash -c 'trap "" TERM; while true; do sleep 1; done' &
echo $! > "$(dirname "$0")/child.pid"
sleep 600
"""
FAILING = """#!/usr/bin/env bash
echo "ValueError: the model folder is gone" >&2
exit 3
"""


def script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.sh"
    path.write_text(text)
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie awaiting its reaper is gone for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def assert_group_gone(server: Server, tmp_path: Path) -> None:
    assert server.process is not None and server.process.poll() is not None
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the server's child survived the stop"


def test_a_server_answers_and_is_stopped_with_its_children(tmp_path: Path) -> None:
    server = Server(script(tmp_path, HEALTHY), free_port(), tmp_path / "log", dict(os.environ), [], 30)
    with server:
        assert server.get("/metrics").startswith("vllm:spec_decode_num_drafts_total")
        assert alive(int((tmp_path / "child.pid").read_text()))
    assert_group_gone(server, tmp_path)


def test_an_error_inside_still_stops_the_server(tmp_path: Path) -> None:
    server = Server(script(tmp_path, HEALTHY), free_port(), tmp_path / "log", dict(os.environ), [], 30)
    with pytest.raises(RuntimeError), server:
        raise RuntimeError("the load generator failed")
    assert_group_gone(server, tmp_path)


def test_a_server_that_misses_its_timeout_is_stopped(tmp_path: Path) -> None:
    server = Server(script(tmp_path, NEVER_READY), free_port(), tmp_path / "log", dict(os.environ), [], 2)
    started = time.monotonic()
    with pytest.raises(EngineError, match="did not answer /health within 2 s"), server:
        pytest.fail("entered a server that never answered")
    assert time.monotonic() - started < 20
    assert_group_gone(server, tmp_path)


def test_a_server_that_exits_says_why_in_one_line(tmp_path: Path) -> None:
    server = Server(script(tmp_path, FAILING), free_port(), tmp_path / "log", dict(os.environ), [], 30)
    with pytest.raises(EngineError) as error, server:
        pass
    assert "status 3" in str(error.value) and "the model folder is gone" in str(error.value)
    assert "\n" not in str(error.value)


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port_free(port)
        server = Server(script(tmp_path, HEALTHY), port, tmp_path / "log", dict(os.environ), [], 30)
        with pytest.raises(ConfigurationError), server:
            pass
        assert server.process is None and not (tmp_path / "child.pid").exists()
