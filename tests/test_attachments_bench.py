"""The attachment benchmark runs (on a few pages) and prints each figure it promises."""

from __future__ import annotations

import sys

import pytest


def test_the_attachment_benchmark_prints_its_figures(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_attachments

    monkeypatch.setattr(sys, "argv", ["bench_attachments", "--pages", "3", "--repeats", "1", "--no-bomb"])
    bench_attachments.main()
    out = capsys.readouterr().out
    assert "3-page text PDF" in out
    for label in ("1 page (the child's start-up)", "3 pages, whole text", "3 pages, default cap"):
        line = next(row for row in out.splitlines() if row.startswith(label))
        assert " ok " in line and "wall" in line and "child cpu" in line and "child peak rss" in line
    assert out.count("load ") == 4
