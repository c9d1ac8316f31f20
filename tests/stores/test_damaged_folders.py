"""Damaged, hostile and unusual index folders give one clear line and lose nothing (issue 11).

Each case runs the real `suture` command, as a user would meet it. The permission
cases need a second user: as root, they run the command as `nobody` (`setpriv`);
as another user they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SUTURE = [sys.executable, "-m", "suture"]
QUESTION = "How is a connection established?"


def suture(*args: object, user: str | None = None, cwd: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    command = [*SUTURE, *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    if user is not None:
        command = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", *command]
        env["HOME"] = str(cwd or "/tmp")
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          cwd=cwd)


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


@pytest.fixture(scope="module")
def shared_root() -> Iterator[Path]:
    """A folder every user may enter (pytest's own tmp folders are private to root)."""
    root = Path(tempfile.mkdtemp(prefix="suture-damage-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def built(shared_root: Path) -> Path:
    docs = shared_root / "docs"
    docs.mkdir()
    (docs / "tcp.txt").write_text(
        "A connection is established by a three-way handshake of SYN segments. " * 30)
    (docs / "udp.txt").write_text("Datagrams are sent without a connection. " * 30)
    index = shared_root / "idx"
    result = suture("index", docs, "--index", index, "--embedder", "hashing", "-q")
    assert result.returncode == 0, result.stderr
    return index


def copy_of(index: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(index, target)
    return target


def answers(index: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return suture("query", QUESTION, "--index", index, "--json", **kwargs)  # type: ignore[arg-type]


def test_a_file_given_as_the_index(built: Path, tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("my notes")
    result = suture("index", built.parent / "docs", "--index", target, "--embedder", "hashing")
    assert_one_clear_line(result, "is a file, not a folder")
    assert target.read_text() == "my notes"  # nothing overwritten


def test_a_garbage_database(built: Path, tmp_path: Path) -> None:
    index = copy_of(built, tmp_path)
    for name in ("store.sqlite-wal", "store.sqlite-shm"):
        (index / name).unlink(missing_ok=True)
    (index / "store.sqlite").write_bytes(b"this is not a database" * 100)
    assert_one_clear_line(answers(index), "not a readable suture index database",
                          "rebuild the index")


@pytest.mark.parametrize("damage", ["truncated", "bad_crc", "empty", "garbage"])
def test_a_damaged_matrix_cache_is_rebuilt(built: Path, tmp_path: Path, damage: str) -> None:
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    matrix = index / "matrix.npz"
    data = matrix.read_bytes()
    if damage == "truncated":
        matrix.write_bytes(data[: len(data) // 2])
    elif damage == "bad_crc":
        middle = len(data) // 2
        matrix.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:])
    elif damage == "empty":
        matrix.write_bytes(b"")
    else:
        matrix.write_bytes(os.urandom(len(data)))
    result = answers(index)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    with open(matrix, "rb") as handle:  # rebuilt in place
        assert handle.read(2) == b"PK"


def test_a_lost_manifest_is_rewritten_and_a_contradicting_one_refused(
    built: Path, tmp_path: Path
) -> None:
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    (index / "manifest.json").unlink()
    other = suture("index", built.parent / "docs", "--index", index, "--embedder", "hashing",
                   "--chunk-size", "300", "--chunk-overlap", "30")
    assert_one_clear_line(other, "300")  # the store still knows its own settings
    result = answers(index)
    assert result.returncode == 0 and json.loads(result.stdout) == expected
    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["chunk_size"] == 600  # rewritten from the database
    manifest["dimension"] = 32
    (index / "manifest.json").write_text(json.dumps(manifest))
    assert_one_clear_line(answers(index), "database is authoritative")


def test_an_index_from_before_the_stored_manifest_keeps_working(
    built: Path, tmp_path: Path
) -> None:
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    with sqlite3.connect(index / "store.sqlite") as connection:
        connection.execute("DELETE FROM meta WHERE key = 'manifest'")
    result = answers(index)
    assert result.returncode == 0 and json.loads(result.stdout) == expected
    (index / "manifest.json").unlink()
    with sqlite3.connect(index / "store.sqlite") as connection:
        connection.execute("DELETE FROM meta WHERE key = 'manifest'")
    assert_one_clear_line(answers(index), "records no settings")


def test_empty_and_blank_queries_are_refused(built: Path) -> None:
    for query in ("", "   \n\t"):
        result = suture("query", query, "--index", built)
        assert_one_clear_line(result, "the query is empty")


def _as_root() -> bool:
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@pytest.mark.skipif(not _as_root(), reason="needs root to run the command as another user")
def test_a_read_only_folder_is_queried_by_its_owner(built: Path, shared_root: Path) -> None:
    index = shared_root / "read-only"
    shutil.copytree(built, index)
    expected = json.loads(answers(index).stdout)
    for path in [index, *index.iterdir()]:
        os.chown(path, 65534, 65534)  # nobody owns it ...
        path.chmod(0o555 if path.is_dir() else 0o444)  # ... and may only read it
    result = suture("query", QUESTION, "--index", index, "--json", user="nobody",
                    cwd=shared_root)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    write = suture("delete", "tcp.txt", "--index", index, user="nobody", cwd=shared_root)
    assert_one_clear_line(write, "read-only")


@pytest.mark.skipif(not _as_root(), reason="needs root to run the command as another user")
def test_another_user_can_read_an_index_it_may_read(built: Path, shared_root: Path) -> None:
    # The index was written by root with an ordinary umask: every file is world-readable
    # (atomic writes used to leave manifest.json at 0600).
    for path in built.rglob("*"):
        if path.is_file():
            assert path.stat().st_mode & stat.S_IROTH, path
    expected = json.loads(answers(built).stdout)
    result = suture("query", QUESTION, "--index", built, "--json", user="nobody",
                    cwd=shared_root)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected


@pytest.mark.skipif(not _as_root(), reason="needs root to run the command as another user")
def test_an_index_folder_another_user_may_not_enter(built: Path, shared_root: Path) -> None:
    """Mode 700: every path inside raises PermissionError, even a test for a file."""
    index = shared_root / "private"
    shutil.copytree(built, index)
    index.chmod(0o700)
    for command in (["query", QUESTION], ["info"], ["ls"],
                    ["index", built.parent / "docs", "--embedder", "hashing"]):
        result = suture(*command, "--index", index, user="nobody", cwd=shared_root)
        assert_one_clear_line(result, f"no permission to read the index at {index}",
                              "chmod -R a+rX")


def _sql(index: Path, statement: str) -> None:
    with sqlite3.connect(index / "store.sqlite") as connection:
        connection.execute(statement)
    connection.close()


#: rows of store.sqlite damaged in place: the statement, what the error names, and the
#: commands that read the damaged part
_DAMAGED_ROWS = {
    "short-first-vector": (
        "UPDATE chunks SET vector = x'0102' WHERE id = (SELECT min(id) FROM chunks)",
        ("holds a vector of 2 bytes for chunk", "rebuild it"), ("query", "info", "index")),
    "short-vector": (
        "UPDATE chunks SET vector = x'010203' WHERE id = (SELECT max(id) FROM chunks)",
        ("holds a vector of 3 bytes for chunk", "rebuild it"), ("query", "info", "index")),
    "generation": (
        "UPDATE meta SET value = 'many' WHERE key = 'generation'",
        ("its generation", "'many', not a whole number", "rebuild"),
        ("query", "info", "index")),
    "text": (
        "UPDATE documents SET text = x'ff41fe' WHERE doc_id = 'tcp.txt'",
        ("stored text of document 'tcp.txt'", "suture delete tcp.txt"), ("query",)),
    "metadata": (
        "UPDATE documents SET metadata = '{garbage' WHERE doc_id = 'tcp.txt'",
        ("stored metadata of document 'tcp.txt'", "suture delete tcp.txt"),
        ("query",)),
    "sections": (
        "UPDATE documents SET sections = '[{\"title\": 1}]' WHERE doc_id = 'udp.txt'",
        ("stored sections of document 'udp.txt'", "suture delete udp.txt"),
        ("query",)),
}


@pytest.mark.parametrize("damage", sorted(_DAMAGED_ROWS))
def test_a_damaged_row_is_one_line_naming_it(built: Path, tmp_path: Path, damage: str) -> None:
    index = copy_of(built, tmp_path)
    statement, phrases, commands = _DAMAGED_ROWS[damage]
    _sql(index, statement)
    (index / "matrix.npz").unlink()  # else the cached matrix answers without the vectors
    arguments = {"query": ["query", QUESTION], "info": ["info"],
                 "index": ["index", built.parent / "docs", "--embedder", "hashing"]}
    for command in commands:
        result = suture(*arguments[command], "--index", index)
        assert_one_clear_line(result, *phrases)


def test_a_damaged_document_is_mended_by_the_fix_its_error_names(built: Path,
                                                                 tmp_path: Path) -> None:
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    _sql(index, "UPDATE documents SET text = x'ff41fe' WHERE doc_id = 'tcp.txt'")
    assert_one_clear_line(answers(index), "suture delete tcp.txt")
    assert suture("delete", "tcp.txt", "--index", index).returncode == 0
    again = suture("index", built.parent / "docs", "--index", index, "--embedder", "hashing")
    assert again.returncode == 0, again.stderr
    assert json.loads(answers(index).stdout)["spans"] == expected["spans"]


def test_a_garbage_manifest_row_is_restored_from_manifest_json(built: Path,
                                                               tmp_path: Path) -> None:
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    _sql(index, "UPDATE meta SET value = '{garbage' WHERE key = 'manifest'")
    result = answers(index)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert "settings stored in" in result.stderr and "restores them" in result.stderr
    with sqlite3.connect(index / "store.sqlite") as connection:
        row = connection.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()
    connection.close()
    assert json.loads(row[0]) == json.loads((index / "manifest.json").read_text())
    _sql(index, "UPDATE meta SET value = '[1, 2]' WHERE key = 'manifest'")
    (index / "manifest.json").unlink()
    assert_one_clear_line(answers(index), "settings stored in", "are damaged",
                          "no manifest.json to restore them from")


def test_an_unknown_embedder_option_in_the_manifest(built: Path, tmp_path: Path) -> None:
    index = copy_of(built, tmp_path)
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["embedder_options"]["bogus"] = 1
    (index / "manifest.json").write_text(json.dumps(manifest))
    _sql(index, "UPDATE meta SET value = json_set(value, '$.embedder_options.bogus', 1) "
                "WHERE key = 'manifest'")
    assert_one_clear_line(answers(index), "records embedder option 'bogus'",
                          "hashing embedder does not take", "rebuild the index")


def test_truncated_sentence_search_files_are_rebuilt(built: Path, tmp_path: Path) -> None:
    """The sentence matrix and its columns are derived from the sentences table: cut short,
    they are rebuilt from it and the answers stay the same (no traceback)."""
    index = copy_of(built, tmp_path)
    expected = json.loads(answers(index).stdout)
    saved = sorted(p for p in index.rglob("*") if p.is_file() and "sentence-matrix" in p.parts)
    assert saved
    for path in saved:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    result = answers(index)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout) == expected
    indexed = suture("index", built.parent / "docs", "--index", index, "--embedder", "hashing")
    assert indexed.returncode == 0 and "Traceback" not in indexed.stderr


def built_dimension(index: Path) -> int:
    return int(json.loads((index / "manifest.json").read_text())["dimension"])
