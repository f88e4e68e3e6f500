"""The server process: started in a group of its own, refused on a port in use, given up on when it
exits or misses its start timeout, watched once up (its own death and that of a process vLLM titles,
each in one line naming the server and the cause), its engine core made nicer on a CPU, and always
stopped with everything it started (a child that ignores SIGTERM included). Real processes, no vLLM:
the scripts are small bash servers."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from autotune.errors import ConfigurationError, EngineError
from autotune.engines.vllm import server as server_module
from autotune.engines.vllm.server import (HOST, Launch, Server, ServerDied, check_port_free, engine_core_nice,
                                         free_port)

# A script that starts a child which ignores SIGTERM (as a stuck engine core might), writes the
# child's pid, then serves /health as the exported script's "$@" asks (--host H --port P).
HEALTHY = f"""#!/usr/bin/env bash
bash -c 'trap "" TERM; while true; do sleep 1; done' &
echo $! > "$(dirname "$0")/child.pid"
(exec -a VLLM::EngineCore sleep 600) &
echo $! > "$(dirname "$0")/engine.pid"
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


def make_server(tmp_path: Path, text: str, port: int | None = None, timeout_s: float = 30, say=None,
                own_group: bool = True, engine_core_nice: int = 0) -> Server:
    launch = Launch(["bash", str(script(tmp_path, text))], dict(os.environ), own_group=own_group,
                    engine_core_nice=engine_core_nice)
    return Server("schedule server (draft@2)", launch, port or free_port(), tmp_path / "log", start_timeout_s=timeout_s,
                  say=say)


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
    server = make_server(tmp_path, HEALTHY)
    with server:
        assert server.get("/metrics").startswith("vllm:spec_decode_num_drafts_total")
        assert alive(int((tmp_path / "child.pid").read_text()))
        assert server.members == {int((tmp_path / "engine.pid").read_text()): "VLLM::EngineCore"}
        server.check()  # alive: nothing raised
    assert_group_gone(server, tmp_path)


@pytest.mark.parametrize("on_cpu", [True, False])
def test_a_cpu_servers_engine_core_runs_below_the_api_server_and_a_gpu_servers_as_started(tmp_path: Path,
                                                                                          on_cpu: bool) -> None:
    with make_server(tmp_path, HEALTHY, engine_core_nice=engine_core_nice(on_cpu)):
        engine = int((tmp_path / "engine.pid").read_text())
        child = int((tmp_path / "child.pid").read_text())
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, engine) == min(19, ours + (10 if on_cpu else 0))
        assert os.getpriority(os.PRIO_PROCESS, child) == ours  # not vLLM's: untouched


def test_an_error_inside_still_stops_the_server(tmp_path: Path) -> None:
    server = make_server(tmp_path, HEALTHY)
    with pytest.raises(RuntimeError), server:
        raise RuntimeError("the load generator failed")
    assert_group_gone(server, tmp_path)


def test_a_server_that_misses_its_timeout_is_stopped_and_said_to_be_starting_meanwhile(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    monkeypatch.setattr(server_module, "PROGRESS_S", 1.0)
    said: list[str] = []
    server = make_server(tmp_path, NEVER_READY, timeout_s=3, say=said.append)
    started = time.monotonic()
    with pytest.raises(EngineError, match=r"the schedule server \(draft@2\) did not answer /health within 3 s"), server:
        pytest.fail("entered a server that never answered")
    assert time.monotonic() - started < 20
    assert_group_gone(server, tmp_path)
    assert said and all(line.startswith("schedule server (draft@2): still starting (") for line in said)


def test_a_server_that_exits_says_why_in_one_line(tmp_path: Path) -> None:
    server = make_server(tmp_path, FAILING)
    with pytest.raises(ServerDied) as error, server:
        pass
    message = str(error.value)
    assert message.startswith("the schedule server (draft@2) died before /health answered: exit status 3")
    assert "the model folder is gone" in message and "\n" not in message


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port_free(port)
        server = make_server(tmp_path, HEALTHY, port=port)
        with pytest.raises(ConfigurationError), server:
            pass
        assert server.process is None and not (tmp_path / "child.pid").exists()


def test_a_server_killed_by_sigkill_is_reported_at_once_with_the_cause(tmp_path: Path) -> None:
    server = make_server(tmp_path, HEALTHY)
    with server:
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        with pytest.raises(ServerDied) as error:
            server.check()
    message = str(error.value)
    assert message.startswith("the schedule server (draft@2) died: killed by SIGKILL; its log ends: ")
    assert str(tmp_path / "log") in message and "\n" not in message
    assert_group_gone(server, tmp_path)


def test_a_vllm_process_that_is_gone_is_a_dead_server(tmp_path: Path) -> None:
    server = make_server(tmp_path, HEALTHY)
    with server:
        engine = int((tmp_path / "engine.pid").read_text())
        os.kill(engine, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(engine) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ServerDied, match=rf"died: its VLLM::EngineCore \(pid {engine}\) is gone"):
            server.check()
    assert_group_gone(server, tmp_path)


def test_a_server_in_its_starters_group_is_stopped_by_pid_with_everything_under_it(tmp_path: Path) -> None:
    # A study's servers stay in the worker's group (a worker killed with its group takes them along).
    server = make_server(tmp_path, HEALTHY, own_group=False)
    with server:
        assert os.getpgid(server.process.pid) == os.getpgid(0)
        engine = int((tmp_path / "engine.pid").read_text())
    assert_group_gone(server, tmp_path)  # the child that ignores SIGTERM too
    assert not alive(engine)
