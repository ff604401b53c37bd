"""The package version (its own module, so that any module can read it without importing the
package's ``__init__`` and, through it, the estimator)."""

__version__ = "0.1.0"
