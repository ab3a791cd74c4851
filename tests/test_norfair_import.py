"""timeline/norfair_import.py: norfair without importing the SciPy modules it never uses here,
and the deferred names still work (they import the real module at first use)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_the_tracker_starts_without_scipy_stats_and_spatial():
    out = _run(
        """
        import sys
        from spotdiff_cli.timeline.tracks import ObjectTracker, Sighting
        tracker = ObjectTracker(misses=1, min_hits=1)
        seen, _ = tracker.update(0.0, [Sighting(0.0, (10, 10, 50, 80), "person", 0.9)])
        seen, _ = tracker.update(1.0, [Sighting(1.0, (14, 10, 50, 80), "person", 0.9)])
        # Submodules too: the stand-ins once hid a real scipy.spatial (0.2 s) imported behind
        # them, leaving only its package entry out of sys.modules.
        slow = sorted({m.split(".")[1] for m in sys.modules
                       if m.startswith(("scipy.stats", "scipy.spatial"))})
        print(len(seen), seen[0].id, slow)
        """
    )
    assert out == "1 1 []"


def test_deferred_names_are_the_real_ones_at_first_use():
    out = _run(
        """
        import numpy as np
        from spotdiff_cli.timeline.norfair_import import import_norfair
        import_norfair()
        import norfair.distances as nd, norfair.kalman_filter as kf
        a, b = np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[0.0, 0.0]])
        print(nd.cdist(a, b).ravel().tolist())
        print(round(float(kf.multivariate_normal.logpdf([0.0], [0.0], [[1.0]])), 6))
        import scipy.stats, scipy.spatial.distance
        print(type(scipy.stats).__name__, scipy.stats.norm.cdf(0.0), scipy.spatial.distance.cdist is not None)
        """
    )
    assert out.splitlines() == ["[0.0, 5.0]", "-0.918939", "module 0.5 True"]


def test_only_the_tracker_is_imported_and_the_whole_package_still_imports_after():
    out = _run(
        """
        import sys
        from spotdiff_cli.timeline.norfair_import import import_norfair
        tracker = import_norfair()
        skipped = sorted(m for m in ("norfair", "norfair.drawing", "norfair.video",
                                     "norfair.metrics", "importlib.metadata", "scipy")
                         if m in sys.modules)
        import norfair
        print(skipped, norfair.Tracker is tracker.Tracker,
              norfair.Detection is tracker.Detection, hasattr(norfair, "Video"))
        """
    )
    assert out == "[] True True True"


def test_rich_is_left_out_until_norfair_draws_and_kept_when_already_there():
    out = _run(
        """
        import io, sys
        from spotdiff_cli.timeline.norfair_import import import_norfair
        import_norfair()
        before = sorted(m for m in sys.modules if m == "rich" or m.startswith("rich."))
        import norfair.utils as utils
        utils.print_objects_as_table([])  # the one use: the real Rich, imported now
        print(before, "rich.table" in sys.modules, type(sys.modules["rich"]).__name__)
        """
    )
    assert out.splitlines()[-1] == "[] True module"
    out = _run(
        """
        import rich.table
        from spotdiff_cli.timeline.norfair_import import import_norfair
        import_norfair()
        import norfair.utils as utils
        print(utils.Table is rich.table.Table)
        """
    )
    assert out == "True"
