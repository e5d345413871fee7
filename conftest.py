"""Markers by place: a test gets the marker of the folder or file it lives in, so a new test
is marked without being told. ``soak`` alone is given by hand. See pyproject.toml for what
each marker means and docs/development.md for the quick loop that leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
BY_PLACE = {
    "interop": "interop",
    "tests/spark": "spark",
    "tests/store/test_crash.py": "crash",
    "tests/test_docs_examples.py": "docs",
    "tests/browser": "browser",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
        for place, marker in BY_PLACE.items():
            if where == place or where.startswith(place + "/"):
                item.add_marker(marker)
