"""The reference broker reports the package's version (one version string: conformance.__version__)."""

from conformance import __version__

__all__ = ["__version__"]
