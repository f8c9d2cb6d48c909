"""The fetch_url benchmark runs (on a small page) and prints each figure it promises."""

from __future__ import annotations

import re
import sys

import pytest


def test_the_fetch_benchmark_prints_its_figures(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_fetch

    monkeypatch.setattr(sys, "argv", ["bench_fetch", "--size", "60000", "--repeats", "2"])
    bench_fetch.main()
    out = capsys.readouterr().out
    assert re.search(r"page: \d+\.\d\d MB of HTML \(\d+ kB gzip\), load \d", out), out
    for figure in ("reader extraction", "full extraction", "fetch_url reader (plain)", "fetch_url reader (gzip )"):
        assert re.search(re.escape(figure) + r"\s+wall median\s+\d+\.\d ms", out), figure
    assert "-> article," in out and "title 'Tides of the estuary'" in out
