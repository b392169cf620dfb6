"""Deprecated name of lbparse.capture.native_batches (renamed in issue #49:
`columnar` was also the columnar core's wing). Importing it warns; it goes in
a later release."""

import warnings

from lbparse.capture.native_batches import Cut, NativeCapture, NativeUnsupported, available, rules

__all__ = ["Cut", "NativeCapture", "NativeUnsupported", "available", "rules"]

warnings.warn(
    "lbparse.capture.columnar is renamed lbparse.capture.native_batches; "
    "the old name goes in a later release",
    DeprecationWarning,
    stacklevel=2,
)
