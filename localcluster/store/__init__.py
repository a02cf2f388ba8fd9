"""The object store: one global resourceVersion, the write pipeline, watch history and GC.

Synchronous and single-threaded: every write runs to completion without yielding, so writes
are serialized and events leave in resourceVersion order. The server calls it from its event
loop; I/O is limited to the optional journal.

One job a module, each layer using only the ones before it:

- `model.py`: the values (Event, DeleteOptions, Watcher, the well-known keys);
- `admission.py`: pure checks and defaults of a create or an update (names, namespaces,
  immutable metadata, validation, ClusterIPs, CRD status, apply conflicts);
- `state.py`: the objects, their uid/owner indexes, the resourceVersion and the commit
  (journal, history, watchers);
- `reads.py`: get, list (paged, at a resourceVersion) and watch;
- `writes.py`: create, replace, patch, apply, delete, bind;
- `gc.py`: what nobody deletes by hand: dependents of a deleted owner, foreground and orphan
  deletion, terminating namespaces, a removed CRD's objects, and expired Events;
- `core.py`: `Store`, all of the above, with startup (restore, system namespaces, CRDs).
"""

from localcluster.store.core import Store
from localcluster.store.model import CRD_KEY, DeleteOptions, Event, clone

__all__ = ["CRD_KEY", "DeleteOptions", "Event", "Store", "clone"]
