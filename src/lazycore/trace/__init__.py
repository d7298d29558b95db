"""Building graphs: the core API frontends call (:mod:`.core`), recorded and
replayed lowerings (:mod:`.recipes`), views over storages (:mod:`.views`) and
captured steps (:mod:`.capture`). Imports :mod:`lazycore.ir` and
:mod:`lazycore.runtime`; never :mod:`lazycore.observe`."""
