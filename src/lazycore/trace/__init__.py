"""Building graphs: the core API frontends call (:mod:`.core`), the math both
frontends need written once over it (:mod:`.composites`), running a function
with no lowering on the host (:mod:`.fallback`), recorded and replayed
lowerings (:mod:`.recipes`), views over storages (:mod:`.views`) and captured
steps (:mod:`.capture`, guarded by :mod:`.pyreads`), both kept as one structure
and made again one way (:mod:`.fragment`). Imports :mod:`lazycore.ir` and
:mod:`lazycore.runtime`; never :mod:`lazycore.observe`."""
