"""The coverage sweep builds real kernels: the same temporary cache as tests/e2e."""
from tests.e2e.conftest import brrr_cache_dir  # noqa: F401  (package-scoped, autouse)
