"""runstore: a queryable store of training-run logs.

`runstore.open(path)` returns the one entry object, a `Store`; everything else hangs off it.
"""

from .startup import open_database_early, quiet_interrupts

quiet_interrupts()  # only in the `runstore` command: Ctrl-C while it starts is no traceback
open_database_early()  # only for a command that queries: made while the rest imports

from .errors import RunstoreError  # noqa: E402
from .store import Store, open  # noqa: E402

__all__ = ["Store", "open", "RunstoreError"]
__version__ = "0.1.0"
