"""The README's configuration table, the tables of docs/configuration.md, the schema in
``proton_broker.config`` and ``conf/broker.yaml`` name the same keys, with the same defaults.

A row of the table is one whose first cell is a key in backticks (``section.key``, or
``queues``); its second cell is the default in backticks, written as YAML. A key added to the
schema must be added to the README, docs/configuration.md (whose rows have the same form; the
declarations ``queues``, ``exchanges``, ``bindings`` and ``listeners`` are described there in
prose) and ``conf/broker.yaml`` too, and a default changed in one place must be changed in the
others.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from proton_broker.config import Config

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CONFIGURATION = REPO / "docs" / "configuration.md"
BROKER_YAML = REPO / "conf" / "broker.yaml"
ROW = re.compile(r"^\|\s*`(?P<key>[a-z_]+(?:\.[a-z_]+)?)`\s*\|\s*`(?P<default>[^`]*)`\s*\|")


def schema_defaults() -> dict[str, Any]:
    """Every key of the schema with its default: ``section.key`` for a section's fields, and
    the top-level fields that are not sections (``queues``) on their own."""
    defaults: dict[str, Any] = {}
    config = Config()
    for section in fields(Config):
        value = getattr(config, section.name)
        if is_dataclass(value):
            for key in fields(value):
                defaults[f"{section.name}.{key.name}"] = getattr(value, key.name)
        else:
            defaults[section.name] = value
    return defaults


def table_rows(page: Path = README) -> dict[str, str]:
    """The configuration rows of ``page``: key -> the default cell's text."""
    rows: dict[str, str] = {}
    for line in page.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            key = match.group("key")
            assert key not in rows, f"{page.name}: `{key}` has two rows"
            rows[key] = match.group("default")
    return rows


def readme_rows() -> dict[str, str]:
    """The configuration table of the README: key -> the default cell's text."""
    return table_rows(README)


def test_the_configuration_page_has_a_row_for_every_key_of_each_section_and_no_other() -> None:
    documented = set(table_rows(CONFIGURATION))
    schema = {key for key in schema_defaults() if "." in key}
    assert documented == schema, (
        f"missing from docs/configuration.md: {sorted(schema - documented)}; "
        f"not in the schema: {sorted(documented - schema)}"
    )


@pytest.mark.parametrize("key", sorted(k for k in schema_defaults() if "." in k))
def test_the_configuration_page_gives_the_schema_default(key: str) -> None:
    cell = table_rows(CONFIGURATION).get(key)
    assert cell is not None, f"docs/configuration.md has no row for `{key}`"
    assert yaml.safe_load(cell) == schema_defaults()[key], (
        f"docs/configuration.md: `{key}` default `{cell}` is not {schema_defaults()[key]!r}"
    )


def test_the_schema_is_read() -> None:
    keys = schema_defaults()
    assert {"broker.host", "tls.verify_clients", "queue.max_key_updates", "queues"} <= set(keys)


def test_the_readme_table_lists_every_key_of_the_schema_and_no_other() -> None:
    documented, schema = set(readme_rows()), set(schema_defaults())
    assert documented == schema, (
        f"missing from README.md: {sorted(schema - documented)}; "
        f"not in the schema: {sorted(documented - schema)}"
    )


@pytest.mark.parametrize("key", sorted(schema_defaults()))
def test_the_readme_default_is_the_schema_default(key: str) -> None:
    cell = readme_rows().get(key)
    assert cell is not None, f"README.md has no row for `{key}`"
    assert yaml.safe_load(cell) == schema_defaults()[key], (
        f"README.md: `{key}` default `{cell}` is not {schema_defaults()[key]!r}"
    )


def test_conf_broker_yaml_mentions_every_key() -> None:
    conf = yaml.safe_load(BROKER_YAML.read_text(encoding="utf-8"))
    assert isinstance(conf, dict)
    config = Config()
    sections = {f.name for f in fields(Config) if is_dataclass(getattr(config, f.name))}
    declared = {f.name for f in fields(Config)} - sections  # lists and maps: no fixed keys
    assert set(conf) - declared == sections, "conf/broker.yaml: sections differ from the schema"
    for section in sections:
        expected = {f.name for f in fields(getattr(config, section))}
        assert set(conf[section] or {}) == expected, f"conf/broker.yaml: section {section}"
    # `queues`, `exchanges`, `bindings`, `listeners` may be absent or empty: no fixed names


def test_conf_broker_yaml_gives_the_schema_defaults() -> None:
    conf = yaml.safe_load(BROKER_YAML.read_text(encoding="utf-8"))
    defaults = schema_defaults()
    for section, values in conf.items():
        if section in ("queues", "exchanges", "bindings", "listeners"):
            continue
        for key, value in (values or {}).items():
            assert value == defaults[f"{section}.{key}"], f"conf/broker.yaml: {section}.{key}"
