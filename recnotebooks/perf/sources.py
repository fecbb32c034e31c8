"""Moved: the public documents the model cites live in :mod:`recnotebooks.published.sources`.

The old names work from here until the next release.
"""

from recnotebooks.published.sources import DOCUMENTS, cite

__all__ = ["DOCUMENTS", "cite"]
