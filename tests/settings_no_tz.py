"""The test settings with ``USE_TZ = False``: a configuration the app must refuse (B10 A)."""

from .settings import *  # noqa: F403

USE_TZ = False
