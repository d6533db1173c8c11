"""runstore: a queryable store of training-run logs.

`runstore.open(path)` returns the one entry object, a `Store`; everything else hangs off it.
"""

from .errors import RunstoreError
from .store import Store, open

__all__ = ["Store", "open", "RunstoreError"]
__version__ = "0.1.0"
