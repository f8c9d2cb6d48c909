"""The memory benchmark runs (on small numbers) and prints each figure it promises."""

from __future__ import annotations

import sys

import pytest


def test_the_memory_benchmark_prints_its_figures(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_memory

    monkeypatch.setattr(sys, "argv", ["bench_memory", "--personal", "60", "--shared", "12", "--messages", "20",
                                      "--scale", "300", "--repeats", "5", "--no-semantic"])
    bench_memory.main()
    out = capsys.readouterr().out
    assert "memory selection: 60 personal and 12 shared memories, 20 messages, caps 5 bodies / 6000 characters" in out
    assert "terms only, 10 messages sharing a word: body in layer 1" in out
    assert "terms only, 10 messages sharing no word: body in layer 1" in out
    for figure in ("title in layer 2", "either", "layer-1 text median", "memory block median"):
        assert out.count(figure) == 2, figure
    assert "terms only, targets: layer 1 for the word-sharing half" in out
    assert "memory context build, 300 memories: p50" in out and "first build (index cold)" in out
    assert out.count("[load ") == 5
