"""The Python tests need PyTorch with CUDA, a GPU and the built extension; where one is missing,
each test module is skipped with the reason (CI has no GPU and no PyTorch)."""
import pytest


def _missing():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU available to PyTorch"
    try:
        import hipgrad  # noqa: F401
    except ImportError as error:
        return "hipgrad's extension is not built (python3 -m pip install --no-build-isolation ./python): %s" % error
    return None


MISSING = _missing()


def require():
    """(torch, hipgrad), or the calling test module skipped with the reason."""
    if MISSING:
        pytest.skip(MISSING, allow_module_level=True)
    import torch
    import hipgrad
    return torch, hipgrad


@pytest.fixture(autouse=True)
def _seed():
    if not MISSING:
        import torch
        torch.manual_seed(0)
    yield


def pytest_runtest_logreport(report):
    """A failure's report at once (a later crash of the process would lose it)."""
    if report.failed:
        print("\nFAILED %s\n%s" % (report.nodeid, report.longreprtext[-4000:]), flush=True)
