"""Every learner, trajectory tool and gene test gives the outputs recorded in ``tests/data/battery.json``.

The guard of restructures that must not change behaviour. A change that is meant to alter outputs
records new ones with ``python tests/battery.py --write`` in the same commit, and says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/, where the battery lives
sys.path.insert(0, str(HERE))
import battery  # noqa: E402


def test_battery_outputs_are_as_recorded():
    recorded = json.loads(battery.REFERENCE.read_text())["versions"]
    found = battery.library_versions()
    if found != recorded:
        # other releases round differently in the last digits (the oldest-releases CI job, say)
        pytest.skip(f"recorded with {recorded}, running with {found}")
    result = subprocess.run([sys.executable, str(HERE / "battery.py")], env=os.environ | battery.PORTABLE_KERNELS,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "as recorded" in result.stdout


def test_fingerprints_see_one_changed_entry():
    import numpy as np

    values = np.linspace(0.0, 1.0, 1000)
    changed = values.copy()
    changed[517] += 1e-6
    assert battery.differences({"a": battery.fingerprint(values)}, {"a": battery.fingerprint(values)}) == []
    assert battery.differences({"a": battery.fingerprint(values)}, {"a": battery.fingerprint(changed)})
    swapped = values.copy()
    swapped[[3, 700]] = swapped[[700, 3]]
    assert battery.differences({"a": battery.fingerprint(values)}, {"a": battery.fingerprint(swapped)})
