"""Stand-in ``trtllm-serve MODEL --extra_llm_api_options FILE --port P``: reads the YAML as the
installed line does (llmapi.llm_args), builds the LLM, then answers ``GET /health`` with 200."""

from __future__ import annotations

import argparse
import http.server

from tensorrt_llm.llmapi import LLM
from tensorrt_llm.llmapi.llm_args import update_llm_args_with_extra_options


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(prog="trtllm-serve")
    parser.add_argument("model")
    parser.add_argument("--backend", default="pytorch")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--extra_llm_api_options", default=None)
    args = parser.parse_args()
    LLM(args.model, **update_llm_args_with_extra_options({}, args.extra_llm_api_options))
    http.server.HTTPServer((args.host, args.port), Health).serve_forever()


if __name__ == "__main__":
    main()
