"""`import kiln` gives libgomp kiln's OpenMP wait default, and only when the user set none."""
import os
import re
import subprocess
import sys

import kiln


def libgomp_spin_count(**env):
    """GOMP_SPINCOUNT as libgomp reports it (OMP_DISPLAY_ENV) in a fresh `import kiln`."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    clean.update(env, OMP_DISPLAY_ENV="VERBOSE")
    r = subprocess.run([sys.executable, "-c", "import kiln"], env=clean, capture_output=True,
                       text=True, check=True)
    m = re.search(r"GOMP_SPINCOUNT = '(\d+)'", r.stderr)
    assert m, r.stderr
    return m.group(1)


def test_default_applies_when_unset():
    assert libgomp_spin_count() == kiln._kiln._OMP_SPIN_COUNT_DEFAULT


def test_users_variables_win():
    assert libgomp_spin_count(OMP_WAIT_POLICY="passive") == "0"
    assert libgomp_spin_count(GOMP_SPINCOUNT="777") == "777"
