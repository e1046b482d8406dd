"""The test settings with ``USE_TZ = False``: a configuration the app must refuse (B10 A)."""

from .settings import *

USE_TZ = False
