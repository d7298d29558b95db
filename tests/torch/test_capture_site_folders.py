"""A library in any site folder on the path is library code to capture's guards.

A venv made with ``--system-site-packages``, ``pip install --user`` or a
``.pth`` line puts packages in site folders that are not the interpreter's
own. Capture counted code there as the user's: transformers' KV cache
(``DynamicLayer.keys``, read in cache_utils.py) was guarded as a user's
attribute read, the guard held the step's tensors alive, and capture refused
every GPT-2 step ("the step keeps 9 tensor(s) it made ..."), replaying none.
"""

import os
import subprocess
import sys
import textwrap

_LIB = '''
class Cache:
    """A library object made inside the step, read and dropped there."""

    def __init__(self, x):
        self.keys = x * 2

    def total(self):
        return self.keys.sum()
'''

_CHILD = '''
import sys
sys.path.insert(0, {site!r})  # a site folder on the path, as a .pth line or --user adds one
import torch
import lazycore.torch as ltorch
from lazycore.trace.pyreads import is_user_code
import sitelib

assert not is_user_code(sitelib.__file__), sitelib.__file__
dev = ltorch.device()
w = torch.ones(4, device=dev)

@ltorch.capture
def step(x):
    c = sitelib.Cache(x * w)
    return c.total()

for i in range(5):
    out = step(torch.full((4,), float(i)).to(dev))
    ltorch.mark_step()
    assert float(out.cpu()) == 8.0 * i, (i, float(out.cpu()))
assert step.replays >= 2, (step.replays, step.traces, step.why)
'''


def test_a_site_folder_on_the_path_is_no_user_code(tmp_path):
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "sitelib.py").write_text(_LIB)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD.format(site=str(site)))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
