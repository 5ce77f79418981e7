"""Cost tests that compile kernels keep them in a temporary cache (never ~/.cache), where
no calibration exists: compiles there see the generic-CPU DeviceSpec. The fixture is the
end-to-end tests' own, registered for this package too."""
from tests.e2e.conftest import brrr_cache_dir  # noqa: F401
