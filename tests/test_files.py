"""One way to open a file that must be a regular file: a link is never followed and a FIFO never waited
on, whether the store reads a trial, a lock is taken or a CI summary is appended to."""
from __future__ import annotations

import os

import pytest

from harness.core.files import UnsafeFile, open_regular, unused_path
from harness.core.locks import FileLock
from harness.store import read_regular


def test_a_regular_file_opens_blocking_and_a_missing_one_is_created_when_asked(tmp_path):
    fd = open_regular(tmp_path / "new.txt", os.O_WRONLY | os.O_CREAT)
    try:
        assert os.get_blocking(fd)
    finally:
        os.close(fd)
    assert (tmp_path / "new.txt").is_file()


def test_a_link_is_refused_and_its_target_left_alone(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        read_regular(tmp_path / "link")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        FileLock(tmp_path / "link").acquire()
    assert target.read_text() == "keep"


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_regular(fifo)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        FileLock(fifo).acquire()


def test_a_path_set_aside_twice_within_a_second_does_not_replace_the_first(tmp_path):
    first = unused_path(tmp_path, "mlflow.db.broken")
    first.write_text("first")
    second = unused_path(tmp_path, "mlflow.db.broken")
    second.write_text("second")
    third = unused_path(tmp_path, "mlflow.db.broken")
    assert len({first, second, third}) == 3 and first.read_text() == "first"
    assert all(p.name.startswith("mlflow.db.broken-") for p in (first, second, third))
