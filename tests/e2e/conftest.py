"""End-to-end tests build real kernels: keep them in one temporary cache for the package,
never in ~/.cache. BRRR_CACHE_DIR is also what a subprocess under test inherits."""
import os

import pytest


@pytest.fixture(scope="package", autouse=True)
def brrr_cache_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("brrr-cache"))
    old = os.environ.get("BRRR_CACHE_DIR")
    os.environ["BRRR_CACHE_DIR"] = path
    yield path
    if old is None:
        os.environ.pop("BRRR_CACHE_DIR", None)
    else:
        os.environ["BRRR_CACHE_DIR"] = old
