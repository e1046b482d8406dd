"""``DDS_TEST_SHARD`` (tests/conftest.py): ``scripts/test`` splits SQLite's run in two
lanes by test file; the shards must partition the files, and a bad value must stop the run
with a clear message rather than run nothing or everything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from .conftest import REPO, file_shard, shard_of


def test_a_shard_is_k_of_n():
    assert shard_of("") is None
    assert shard_of("1/2") == (0, 2)
    assert shard_of("2/2") == (1, 2)


@pytest.mark.parametrize("value", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused(value):
    with pytest.raises(pytest.UsageError, match="DDS_TEST_SHARD"):
        shard_of(value)


def test_the_shards_partition_the_test_files_and_keep_a_file_whole():
    files = sorted((REPO / "tests").glob("test_*.py"))
    shards = {f: file_shard(SimpleNamespace(path=f), 2) for f in files}
    assert set(shards.values()) == {0, 1}  # both lanes get work
    # The same file is always in the same shard, however its path is spelled.
    again = {
        f: file_shard(SimpleNamespace(path=REPO / "tests" / ".." / "tests" / f.name), 2)
        for f in files
    }
    assert shards == again
