"""ci/safe_files.py on crafted trees: reads stay inside the root and bounded; writes are atomic
and never follow a symlink (SECURITY.md)."""
from __future__ import annotations

import os

import pytest

from ci.registration import register
from ci.safe_files import UnreadableFile, UnsafeOutput, read_inside, write_atomic


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_read_inside_refuses_links_out_of_the_root_and_special_files(tmp_path):
    root, outside = tmp_path / "repo", tmp_path / "secret.txt"
    root.mkdir()
    outside.write_text("TOKEN=abc")
    (root / "ok.yml").write_text("on: push\n")
    (root / "inner.yml").symlink_to(root / "ok.yml")
    (root / "out.yml").symlink_to(outside)
    (root / "zero.yml").symlink_to("/dev/zero")
    (root / "dangling.yml").symlink_to(root / "missing")
    (root / "dir.yml").mkdir()
    (root / "latin1.yml").write_bytes(b"name: caf\xe9\n")
    assert read_inside(root, root / "ok.yml") == "on: push\n"
    assert read_inside(root, root / "inner.yml") == "on: push\n"
    reasons = {}
    for name in ("out.yml", "zero.yml", "dangling.yml", "dir.yml", "latin1.yml"):
        with pytest.raises(UnreadableFile) as info:
            read_inside(root, root / name)
        assert str(info.value).startswith(name + ": ") and "\n" not in str(info.value)
        reasons[name] = info.value.reason
    assert "outside" in reasons["out.yml"] and "outside" in reasons["zero.yml"]
    assert "directory" in reasons["dir.yml"] and "UTF-8" in reasons["latin1.yml"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_read_inside_caps_the_size_and_refuses_an_in_tree_device_link(tmp_path):
    (tmp_path / "big.py").write_bytes(b"x" * 2049)
    with pytest.raises(UnreadableFile, match="over the 2048-byte cap"):
        read_inside(tmp_path, tmp_path / "big.py", max_bytes=2048)
    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableFile, match="not a regular file"):
        read_inside(tmp_path, fifo)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_write_atomic_replaces_whole_and_refuses_symlinks(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    link = tmp_path / "out.sarif"
    link.symlink_to(target)
    with pytest.raises(UnsafeOutput, match="symlink"):
        write_atomic(link, "{}")
    assert target.read_text() == "keep me"
    out = tmp_path / "baseline.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    write_atomic(out, "new\n")
    assert out.read_text() == "new\n" and (os.stat(out).st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json", "out.sarif", "victim.txt"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_write_atomic_leaves_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    out = tmp_path / "baseline.json"
    out.write_text("whole old baseline")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        write_atomic(out, "half")
    assert out.read_text() == "whole old baseline"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]
