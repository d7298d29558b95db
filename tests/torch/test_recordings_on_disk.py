"""Lowering recordings kept on disk (lazycore.frontends.torch.recipe_store): a
second process with the same cache folder records no lowering it loaded,
compiles nothing (its graph is the first's), and gets the first's values; a
tampered entry, or one of another kind, is refused with the cache's warning."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from lazycore.runtime import diskcache
from lazycore.runtime.diskcache import DATA_SUFFIX

TIMEOUT = 300

PROGRAM = """
    import json, torch, lazycore, lazycore.torch as ltorch

    def step(x, w, b, scale):
        h = torch.nn.functional.gelu(x @ w + b) * scale  # a matmul, a decomposition, a float argument
        h = torch.nn.functional.layer_norm(h, (5,))
        s = torch.cat([h, h - 1.5], dim=1).softmax(dim=1).sum(dim=0)
        s.add_(0.25)  # in place
        return s, h.max(dim=1)[0]

    g = torch.Generator().manual_seed(0)
    args = [torch.randn(4, 3, generator=g), torch.randn(3, 5, generator=g), torch.randn(5, generator=g)]
    dev = ltorch.device()
    lazy = [a.to(dev) for a in args]
    ltorch.mark_step(wait=True)
    lazycore.metrics.reset()
    got = [o.cpu() for o in step(*lazy, 0.5)]
    c = lazycore.metrics.counters()
    counts = {k: c[k] for k in ("recordings", "recordings_loaded", "compiles", "disk_cache_hits")}
    again = [o.cpu() for o in step(*lazy, 0.75)]  # another value of the float (a parametric replay)
    want = [step(*args, 0.5), step(*args, 0.75)]
    close = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got + again, want[0] + want[1]))
    print(json.dumps({**counts, "bits": [t.numpy().tobytes().hex() for t in got + again], "close": close}))
"""


# One signature, one float value, two aliasings of the inputs: AdamW's
# ``exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)`` is called on one handle
# twice, and on a bias's gradient that is a view (read twice: two handles).
# Each aliasing gets its own recording, with its own broadcast of the float;
# the second was stored in the first's place, so another process loaded only
# it and served every call with it: one broadcast fewer, another program key
# (a tiny GPT-2's AdamW step: 319 broadcasts against 320), a compile.
ALIASED_PROGRAM = """
    import json, torch, lazycore, lazycore.torch as ltorch

    def step(m, g, gv):
        m.addcmul_(g, g, value=0.001)
        m.addcmul_(gv, gv, value=0.001)
        m.addcmul_(g, g, value=0.001)
        return m

    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(32, generator=gen), torch.randn(32, generator=gen), torch.randn(1, 32, generator=gen)]
    dev = ltorch.device()
    m, g, g2 = [a.to(dev) for a in args]
    ltorch.mark_step(wait=True)
    lazycore.metrics.reset()
    got = step(m, g, g2.reshape(32)).cpu()
    c = lazycore.metrics.counters()
    counts = {k: c[k] for k in ("recordings", "recordings_loaded", "compiles", "disk_cache_hits")}
    want = step(args[0].clone(), args[1], args[2].reshape(32))
    close = torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    print(json.dumps({**counts, "bits": [got.numpy().tobytes().hex()], "close": close}))
"""


def run(cache_dir, program=PROGRAM):
    env = {k: v for k, v in os.environ.items() if k != "LAZYCORE_CACHE_DIR"}
    env["LAZYCORE_CACHE_DIR"] = str(cache_dir)
    env["LAZYCORE_RECORDINGS_ON_DISK"] = "1"
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True,
                         timeout=TIMEOUT, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    ans = json.loads(out.stdout.strip().splitlines()[-1])
    ans["stderr"] = out.stderr
    return ans


def test_a_second_process_records_no_lowering_it_loaded_and_compiles_nothing(tmp_path):
    one = run(tmp_path)
    assert one["close"] and one["recordings"] > 0 and one["recordings_loaded"] == 0 and one["compiles"] >= 1
    two = run(tmp_path)
    assert two["close"] and two["bits"] == one["bits"]
    assert two["recordings_loaded"] > 0
    # each recording loaded is one not made (views' and decompositions' recordings are not kept)
    assert two["recordings"] + two["recordings_loaded"] == one["recordings"]
    assert two["compiles"] == 0 and two["disk_cache_hits"] >= 1  # the loaded recordings made the first's graph
    assert "Warning" not in two["stderr"]


def test_recordings_of_two_aliasings_of_one_key_are_both_loaded(tmp_path):
    one = run(tmp_path, ALIASED_PROGRAM)
    assert one["close"] and one["recordings_loaded"] == 0 and one["compiles"] == 1
    two = run(tmp_path, ALIASED_PROGRAM)
    assert two["close"] and two["bits"] == one["bits"]
    assert two["recordings_loaded"] == 2  # both addcmul_ recordings (the view's read is not kept)
    assert two["compiles"] == 0 and two["disk_cache_hits"] == 1  # the first's graph, node for node


@pytest.fixture
def folder(tmp_path):
    from lazycore import config

    with config.override(cache_dir=str(tmp_path), recordings_on_disk=True):
        yield tmp_path


def test_a_tampered_recordings_entry_is_refused_with_the_caches_warning(folder):
    import torch

    from lazycore.frontends.torch import recipe_store
    from lazycore.frontends.torch.tensor import lc_device
    import lazycore.torch as ltorch

    store = recipe_store.RecipeStore()
    tdev = torch.device(ltorch.device())
    entry = store._entry(lc_device(tdev))
    table = {"signature": {}}
    diskcache.DISK.store_data(entry, pickle.dumps(table), "recordings")
    assert store._load(entry) == table
    path = folder / (entry.hex() + DATA_SUFFIX)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.warns(diskcache.DiskCacheWarning, match="digest does not match"):
        memo = store.memo("signature", tdev)
    assert type(memo) is recipe_store.StoredMemo and not memo  # recorded as if there were no entry
    # a meta store's entry (another kind) under the recordings' key is refused too
    diskcache.DISK.store_data(entry, pickle.dumps(table))
    with pytest.warns(diskcache.DiskCacheWarning, match="not a data entry of kind 'recordings'"):
        assert store._load(entry) == {}


def test_an_entry_is_read_only_as_the_kind_it_was_written_as():
    secret, key = b"s" * 32, b"k" * 16
    meta = diskcache.pack_data(key, b"payload", secret)  # the meta store's kind
    assert diskcache.unpack_data(meta, key, secret) == b"payload"
    with pytest.raises(ValueError, match="not a data entry of kind 'recordings'"):
        diskcache.unpack_data(meta, key, secret, "recordings")
    kept = diskcache.pack_data(key, b"payload", secret, "recordings")
    assert diskcache.unpack_data(kept, key, secret, "recordings") == b"payload"
    with pytest.raises(ValueError, match="not a data entry of kind 'data'"):
        diskcache.unpack_data(kept, key, secret)
