"""``proton-broker-config user``: the broker's users, in its Cyrus sasldb file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def user(data_dir: Path, *words: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proton_broker.cli", "user", *words, "--data-dir", str(data_dir)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )


def names(data_dir: Path) -> list[str]:
    listed = user(data_dir, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def test_users_are_added_listed_and_deleted_in_the_data_directory(tmp_path: Path) -> None:
    assert names(tmp_path) == []
    assert user(tmp_path, "add", "bob", stdin="pw-b\n").returncode == 0
    assert user(tmp_path, "add", "alice", stdin="pw-a\n").returncode == 0
    assert names(tmp_path) == ["alice", "bob"]
    assert (tmp_path / "users.sasldb").stat().st_mode & 0o777 == 0o600
    assert user(tmp_path, "delete", "bob").returncode == 0
    assert names(tmp_path) == ["alice"]
    assert user(tmp_path, "list").stdout == "alice\n"


def test_a_password_is_never_taken_from_the_command_line(tmp_path: Path) -> None:
    assert user(tmp_path, "add", "alice", stdin="pw-a\n").returncode == 0
    # a password is never an argument: a second word is a usage error
    refused = user(tmp_path, "passwd", "alice", "secret")
    assert refused.returncode == 2 and "unrecognized arguments: secret" in refused.stderr


def test_adding_a_user_twice_or_changing_a_missing_one_fails_saying_why(tmp_path: Path) -> None:
    assert user(tmp_path, "add", "alice", stdin="pw\n").returncode == 0
    again = user(tmp_path, "add", "alice", stdin="pw\n")
    assert again.returncode == 1 and "user 'alice' exists already" in again.stderr
    missing = user(tmp_path, "passwd", "bob", stdin="pw\n")
    assert missing.returncode == 1 and "no user 'bob'" in missing.stderr
    gone = user(tmp_path, "delete", "bob")
    assert gone.returncode == 1 and "no user 'bob'" in gone.stderr


def test_bad_names_and_passwords_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    for name in ("with space", "a:b", "x" * 65, "al@ice"):
        refused = user(tmp_path, "add", name, stdin="pw\n")
        assert refused.returncode == 1 and "bad user name" in refused.stderr, name
    for password, said in (("\n", "empty"), (" pw\n", "blanks"), ("x" * 1025, "longer")):
        refused = user(tmp_path, "add", "alice", stdin=password)
        assert refused.returncode == 1 and said in refused.stderr, password
    assert not (tmp_path / "users.sasldb").exists()


def test_list_and_the_other_commands_check_their_words(tmp_path: Path) -> None:
    assert user(tmp_path, "list", "alice").returncode == 2
    assert user(tmp_path, "add").returncode == 2
    assert user(tmp_path, "rename", "alice").returncode == 2


def test_the_user_database_can_be_named_in_the_broker_config(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "people.sasldb"
    conf = tmp_path / "broker.yaml"
    conf.write_text(f"sasl:\n  user_db: {db}\n")
    made = subprocess.run(
        [sys.executable, "-m", "proton_broker.cli", "user", "add", "carol", "--config", str(conf)],
        input="pw\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert made.returncode == 0, made.stderr
    assert db.exists()
