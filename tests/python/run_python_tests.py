"""Runs pytest on the PyTorch package's tests, or exits 77 (CTest's skip) with the reason where
they cannot run here: no pytest, or what python/tests/conftest.py finds missing (PyTorch, a GPU,
the built extension)."""
import subprocess
import sys

tests = sys.argv[1]
try:
    import pytest  # noqa: F401
    sys.path.insert(0, tests)
    from conftest import MISSING
except ImportError:
    MISSING = "pytest is not installed"
if MISSING:
    print("skipped: " + MISSING)
    sys.exit(77)
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", tests]))
