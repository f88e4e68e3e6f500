"""Writing exports safely: shell scripts, comments, YAML and file names.

Every value in a script is shell-quoted (:func:`shlex.quote`) but the script's own variables
(:class:`ShellVar`); a value that starts with ``-`` is written ``--flag=value`` (:func:`option`) so
that the engine's argument parser cannot read it as an option, and a value with a NUL character (no
shell argument can hold one) is refused. YAML is written by :func:`yaml.safe_dump`. In comments (of
scripts and YAML) a name's line breaks and other unprintable characters are written as escapes, so
a comment stays one line and shows the name as it is.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from autotune.errors import ConfigurationError


class ShellVar(str):
    """A variable of the script itself (``ShellVar("DATASET")``, ``ShellVar("@")``): written as
    ``"$NAME"``; every other word is :func:`shlex.quote`-d, even one that starts with ``$``."""

    def __new__(cls, name: str) -> ShellVar:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|@", name):
            raise ValueError(f"not a shell variable name: {name!r}")
        return super().__new__(cls, name)

    @property
    def word(self) -> str:
        return f'"${self}"'


def comments(lines: list[str]) -> str:
    """``# line`` per line, each one line: a line break or another unprintable character inside
    (a model path may hold one) is written as its escape, never a line of code or a terminal control."""
    return "".join(f"# {_printable(str(line))}\n" for line in lines)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def yaml_text(data: dict[str, Any]) -> str:
    """``data`` as block-style YAML, keys in their order."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def slugify(text: str, max_length: int = 60) -> str:
    """Lower-case letters, digits and single dashes: safe in any file system and shell."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "unnamed"


def option(flag: str, value: str) -> list[str]:
    """``[flag, value]``, or ``[flag=value]`` where the value starts with ``-``: argparse (vLLM,
    SGLang) and click (trtllm-bench) would take that word for an option, but never split ``=``."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def _shell_word(word: str) -> str:
    if isinstance(word, ShellVar):
        return word.word
    if "\0" in word:
        raise ConfigurationError(f"{word!r} holds a NUL character, which no shell argument can carry; "
                                 "rename the model or path")
    return shlex.quote(word)


def command(lines: list[list[str]]) -> str:
    """One shell command written one option per line; only :class:`ShellVar` words expand."""
    return " \\\n  ".join(" ".join(_shell_word(w) for w in line) for line in lines)


def script(notes: list[str], lines: list[list[str]]) -> str:
    """A bash script: ``notes`` as comments, then ``exec`` of the command ``lines``."""
    return "\n".join(["#!/usr/bin/env bash", comments(notes).rstrip("\n"), "set -euo pipefail", "exec " + command(lines), ""])
