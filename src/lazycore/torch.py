"""``import lazycore.torch as ltorch``: the torch frontend (see :mod:`lazycore.frontends.torch`)."""

from lazycore.frontends.torch import *  # noqa: F401,F403
from lazycore.frontends.torch import __all__  # noqa: F401
