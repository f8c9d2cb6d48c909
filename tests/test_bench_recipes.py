"""The recipes benchmark runs (on small numbers) and prints each figure it promises."""

from __future__ import annotations

import sys

import pytest


def test_the_recipes_benchmark_prints_its_figures(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_recipes

    monkeypatch.setattr(sys, "argv", ["bench_recipes", "--recipes", "40", "--items", "12", "--repeats", "3"])
    bench_recipes.main()
    out = capsys.readouterr().out
    assert "scheduler tick, 40 recipes, none due: median" in out
    assert "scheduler tick, 40 recipes, 10 due (claimed, recorded, begun)" in out
    assert "pipeline, 12 items, scripted model:" in out and "items/s wall" in out
    assert out.count("[load ") == 3
