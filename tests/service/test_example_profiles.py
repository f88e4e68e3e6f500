"""The example profiles shipped in profiles/ are what the code exports today from the JSON shipped
beside them: imported into a fresh database, the profile's every export, as the API serves it (the
bytes `autotune export` writes), is the shipped file, by name and content. When this fails, the
exports changed: run scripts/make_example_profiles.sh and commit profiles/."""

from __future__ import annotations

import re
from pathlib import Path

from autotune import api
from autotune.serving import FORMATS
from service_support import live_server

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
REGENERATE = "the shipped example drifted from the export: run scripts/make_example_profiles.sh"


def test_the_shipped_examples_are_what_the_code_exports_from_their_json(sqlite_url: str) -> None:
    (source,) = PROFILES.glob("*.json")
    profile = api.import_profile(sqlite_url, source)
    shipped = {path.name for path in PROFILES.iterdir() if path.is_file() and path.name != "README.md"}
    served = set()
    with live_server(sqlite_url) as client:
        for fmt in FORMATS:
            answer = client.get(f"/v1/profiles/{profile.id}/export", params={"format": fmt})
            assert answer.status_code == 200, answer.text
            name = re.fullmatch(r'attachment; filename="(.+)"', answer.headers["content-disposition"]).group(1)
            assert name in shipped, f"{name}: {REGENERATE}"
            assert (PROFILES / name).read_bytes() == answer.content, f"{name}: {REGENERATE}"
            served.add(name)
    assert served == shipped, REGENERATE
