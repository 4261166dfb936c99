"""Shared by the package tests: the build directory under test ($NXDNS_BUILD, default build)
and the integration suite's helpers (fake upstream, YAML writer, queries)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    d = Path(os.environ.get("NXDNS_BUILD", ROOT / "build"))
    if not d.is_absolute():
        d = ROOT / d
    if not (d / "nxdns").exists() or not (d / "dist" / "nxdns.service").exists():
        pytest.fail(f"{d} has no built nxdns and dist/nxdns.service: run ninja -C {d}")
    return d


def pytest_ignore_collect(collection_path, config):
    """The integration suite's pytest.ini collects from the repository root; this suite (a
    package build, an install) runs only on its own, through scripts/test-package."""
    if config.inipath is None or config.inipath.resolve() != Path(__file__).parent / "pytest.ini":
        return True
    return None
