"""Building graphs: the core API frontends call (:mod:`.core`), the math both
frontends need written once over it (:mod:`.composites`), running a function
with no lowering on the host (:mod:`.fallback`), recorded and replayed
lowerings (:mod:`.recipes`), views over storages (:mod:`.views`) and captured
steps (:mod:`.capture`), both replayed by generated code (:mod:`.straightline`). Imports :mod:`lazycore.ir` and :mod:`lazycore.runtime`;
never :mod:`lazycore.observe`."""
