"""Run every benchmark module (``bench_*.py``) in turn: ``python -m bench [--only NAME] [ARGS…]``.

Arguments after the options are handed to each module (e.g. ``--notes 10000``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def main() -> int:
    args = sys.argv[1:]
    only: list[str] = []
    while args[:1] == ["--only"]:
        only.append(args[1])
        args = args[2:]
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    if only:
        names = [n for n in names if any(o in n for o in only)]
    failed = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        module = importlib.import_module(f"bench.{name}")
        sys.argv = [name, *args]
        started = time.perf_counter()
        try:
            module.main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                failed.append(name)
        except Exception:
            traceback.print_exc()
            failed.append(name)
        print(f"--- {name} took {time.perf_counter() - started:.1f} s", flush=True)
    if failed:
        print(f"\nbenchmarks that failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
