"""What the build log measured of a boot: cold and warm seconds, and the compile cache one leaves."""

from __future__ import annotations

# Cold and warm boot, seconds (the log's final configuration).
COLD_BOOT_SECONDS = 857
WARM_BOOT_SECONDS = 497
# The measured cache of one configuration (build log: "The JAX compile cache lives there (197 MB measured)").
MEASURED_CACHE_GB = 0.197
