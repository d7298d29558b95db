"""metrics.report(), the profiler (Chrome trace JSON), the slow-compile log, and guards."""

import json
import logging
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe import metrics
from lazycore.ir.config import override
from lazycore.observe.guards import GuardError, guard

HERE = os.path.abspath(__file__)


def here(offset: int = 0) -> str:
    """``file:line`` of the caller's line (plus ``offset``)."""
    f = sys._getframe(1)
    return f"{HERE}:{f.f_lineno + offset}"


@pytest.fixture
def dev():
    return ltorch.device()


def torch_training(dev, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4).to(dev), torch.randn(16, 2).to(dev)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        ltorch.optimizer_step(opt)
        losses.append(loss.item())
    return losses


def numpy_heat(n=32, steps=3):
    u = lnp.zeros((n, n), dtype=lnp.float32)
    u[n // 4 : 3 * n // 4, n // 4 : 3 * n // 4] = 1.0
    for _ in range(steps):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        u[1:-1, 1:-1] += 0.2 * lap
        lazycore.mark_step()
    return float(u.mean())


# --- metrics.report() ------------------------------------------------------------------


def _row(report: str, name: str) -> list[str]:
    m = re.search(rf"^  {name} +(.*)$", report, re.M)
    assert m, f"no row {name!r} in\n{report}"
    return m.group(1).split()


def test_report_has_every_section_with_real_numbers(dev, clean_runtime):
    torch_training(dev)
    numpy_heat()
    fb_line = here(1)
    lnp.unique(lnp.asarray(np.array([[3.0], [1.0], [3.0]], np.float32)), axis=0)  # numpy.unique along an axis falls back
    rep = metrics.report()

    c = metrics.counters()
    assert c["compiles"] >= 2 and c["cache_hits"] >= 1 and c["executions"] >= 6
    for name in ("compiles", "cache_hits", "executions", "transfers_to_device", "transfers_to_host"):
        assert int(_row(rep, name)[0]) == c[name]

    assert "timings (ms):" in rep
    for phase in ("trace", "lowering", "compile", "execute", "transfer"):
        count, total, median, p90, mx = _row(rep, phase)
        assert int(count) > 0, phase
        total, median, p90, mx = map(float, (total, median, p90, mx))
        assert 0 < median <= p90 <= mx <= total, (phase, rep)
    assert int(_row(rep, "compile")[0]) == c["compiles"]
    assert int(_row(rep, "execute")[0]) == c["executions"]

    hits, misses = c["cache_hits"], c["compiles"]
    rate = 100.0 * hits / (hits + misses)
    assert f"compile cache: {hits} hits, {misses} misses (compiles), hit rate {rate:.1f}%" in rep

    assert f"graph sizes per barrier: {c['executions']} barriers" in rep
    sizes = metrics.graph_sizes()
    assert len(sizes) == c["executions"]
    nodes = _row(rep, "nodes")
    assert int(nodes[-1]) == max(s[0] for s in sizes) > 10  # the training step graph
    assert int(_row(rep, "parameters")[-1]) == max(s[2] for s in sizes)

    assert f"fallbacks: {c['fallbacks']} calls" in rep and c["fallbacks"] >= 1
    assert re.search(r"^  numpy\.unique: 1$", rep, re.M), rep
    assert re.search(rf"^ +1  {re.escape(fb_line)}$", rep, re.M), rep

    metrics.reset()
    empty = metrics.report()
    assert int(_row(empty, "compile")[0]) == 0 and "graph sizes per barrier: 0 barriers" in empty
    assert metrics.graph_sizes() == [] and metrics.transfer_timings() == []


def test_timings_keep_their_keys(clean_runtime):
    numpy_heat(steps=1)
    assert set(metrics.timings()) == {"trace", "lowering", "compile", "execute"}
    assert len(metrics.transfer_timings()) >= 1


# --- the profiler ----------------------------------------------------------------------


def test_trace_file_is_chrome_json_with_every_span(dev, tmp_path, clean_runtime):
    path = tmp_path / "sub" / "trace.json"
    with lazycore.profile.trace(path) as rec:
        with lazycore.profile.span("user step"):
            torch_training(dev, steps=3)
        numpy_heat(steps=2)
    assert metrics._recorder is None
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for e in spans:
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["pid"] == os.getpid()
    names = {e["name"] for e in spans}
    assert {"trace", "lowering", "compile", "execute", "transfer", "user step"} <= names
    barriers = [e for e in spans if e["cat"] == "barrier"]
    assert len(barriers) == rec.barriers == metrics.counters()["executions"] >= 5
    assert [b["args"]["cache"] for b in barriers].count("miss") == metrics.counters()["compiles"]
    assert "hit" in [b["args"]["cache"] for b in barriers]
    for b in barriers:
        assert b["args"]["nodes"] > 0 and b["args"]["outputs"] > 0
        inside = [
            e["name"] for e in spans
            if e["cat"] == "lazycore" and b["ts"] <= e["ts"] and e["ts"] + e["dur"] <= b["ts"] + b["dur"] + 1e-3
        ]
        assert "trace" in inside and "execute" in inside
        assert ("compile" in inside) == (b["args"]["cache"] == "miss")
    # nothing is recorded once the block ends
    n = len(rec.events)
    numpy_heat(steps=1)
    assert len(rec.events) == n


def test_nested_traces_both_record(tmp_path, clean_runtime):
    with lazycore.profile.trace(tmp_path / "outer.json") as outer:
        with lazycore.profile.trace(tmp_path / "inner.json") as inner:
            numpy_heat(steps=1)
        numpy_heat(steps=1)
    assert inner.barriers >= 1 and outer.barriers == 2 * inner.barriers
    assert json.loads((tmp_path / "inner.json").read_text())["traceEvents"]


def test_slow_compile_logs_size_and_line(caplog, clean_runtime):
    a = lnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = a * 3.0 + 1.0
    with override(slow_compile_ms=0), caplog.at_level(logging.WARNING, logger="lazycore"):
        line = here(1)
        lazycore.mark_step()
    msgs = [r.getMessage() for r in caplog.records if r.name == "lazycore" and "slow compile" in r.getMessage()]
    assert len(msgs) == 1, caplog.text
    nodes = metrics.graph_sizes()[-1][0]
    assert f"a graph of {nodes} nodes" in msgs[0] and line in msgs[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lazycore"):
        c = b - 2.0
        lazycore.mark_step()  # the default threshold (2 s) is not reached
    assert "slow compile" not in caplog.text
    np.testing.assert_allclose(np.asarray(c), np.arange(12).reshape(3, 4) * 3.0 - 1.0)


def test_slow_compile_setting_from_env():
    code = "from lazycore.ir.config import settings as s; print(s.slow_compile_ms, s.guard_compiles, s.guard_transfers)"
    env = dict(os.environ, LAZYCORE_SLOW_COMPILE_MS="0", LAZYCORE_GUARD_COMPILES="error", LAZYCORE_GUARD_TRANSFERS="Warn")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.0", "error", "warn"]
    env["LAZYCORE_GUARD_COMPILES"] = "sometimes"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "LAZYCORE_GUARD_COMPILES must be one of allow, warn, error" in bad.stderr


# --- guards ------------------------------------------------------------------------------


def test_compile_after_warmup_raises_with_the_line(clean_runtime):
    a = lnp.asarray(np.ones((5, 7), np.float32))
    with guard(compiles="error"):
        b = a * 2.0
        lazycore.mark_step()  # warm-up: the first barrier may compile
        b = a * 2.0  # noqa: F841
        lazycore.mark_step()  # same graph: a cache hit
        c = a - 5.0
        line = here(2)
        with pytest.raises(GuardError) as err:
            lazycore.mark_step()
        assert line in str(err.value) and "compile after warm-up" in str(err.value)
        assert metrics.counters()["compiles"] == 1  # refused before compiling
        assert metrics.counters()["executions"] == 2
    lazycore.mark_step()  # outside the region it compiles
    np.testing.assert_array_equal(np.asarray(c), np.full((5, 7), -4.0, np.float32))
    assert metrics.counters()["compiles"] == 2
    assert isinstance(err.value, RuntimeError)


def test_compile_guard_warn_logs(caplog, clean_runtime):
    a = lnp.asarray(np.ones((6, 2), np.float32))
    with guard(compiles="warn"), caplog.at_level(logging.WARNING, logger="lazycore"):
        b = a + 3.0
        lazycore.mark_step()
        c = a * b
        line = here(1)
        lazycore.mark_step()
    warned = [r.getMessage() for r in caplog.records if "compiles='warn'" in r.getMessage()]
    assert len(warned) == 1 and line in warned[0]
    np.testing.assert_array_equal(np.asarray(c), np.full((6, 2), 4.0, np.float32))


def test_item_inside_implicit_barrier_guard_raises(dev, clean_runtime):
    x = torch.arange(6, dtype=torch.float32).to(dev)
    with guard(implicit_barriers="error"):
        s = (x * 2).sum()
        line = here(2)
        with pytest.raises(GuardError) as err:
            s.item()
        assert line in str(err.value) and "implicit barrier" in str(err.value)
        lazycore.mark_step()  # explicit barriers are fine
        assert s.item() == 30.0  # nothing pending any more: not a barrier
    assert (x + 1).sum().item() == 21.0  # outside the region: allowed


def test_transfers_inside_guard_warn_log(dev, caplog, clean_runtime):
    a = lnp.asarray(np.arange(4, dtype=np.float32)) * 1.5
    t = torch.ones(3).to(dev) * 1.5
    lazycore.mark_step()  # programs' results: an upload's host copy is read with no transfer
    with guard(transfers="warn"), caplog.at_level(logging.WARNING, logger="lazycore"):
        to_host_np = here(1)
        h = np.asarray(a)
        to_host_torch = here(1)
        ht = t.cpu()
        to_dev = here(1)
        u = torch.zeros(2).to(dev)
    msgs = [r.getMessage() for r in caplog.records if "transfers='warn'" in r.getMessage()]
    assert len(msgs) == 3, msgs
    assert "device-to-host" in msgs[0] and to_host_np in msgs[0]
    assert "device-to-host" in msgs[1] and to_host_torch in msgs[1]
    assert "host-to-device" in msgs[2] and to_dev in msgs[2]
    np.testing.assert_array_equal(h, np.arange(4, dtype=np.float32) * 1.5)
    assert ht.tolist() == [1.5, 1.5, 1.5] and u.device == dev


def test_transfer_guard_error_and_nothing_outside(dev, caplog, clean_runtime):
    with guard(transfers="error"):
        line = here(2)
        with pytest.raises(GuardError, match=re.escape(line)):
            torch.ones(2).to(dev)
    # outside every region nothing is guarded: compiles, implicit barriers, transfers
    with caplog.at_level(logging.WARNING, logger="lazycore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.ones(4).to(dev)
        for k in range(3):  # (unusual numbers: the scalar packs stay out of other tests' way)
            assert (x * (k + 2.75)).sum().item() == 4.0 * (k + 2.75)
            y = x.reshape(2, 2) + k  # new graphs: compiles after the first barrier
            assert y.cpu().sum().item() == 4.0 + 4 * k
        assert float(lnp.asarray(np.ones(3, np.float32)).sum()) == 3.0
    assert "guard" not in caplog.text


def test_global_setting_and_override(clean_runtime):
    a = lnp.asarray(np.ones(3, np.float32)) * 1.5
    lazycore.mark_step()  # a program's result: an upload's host copy is read with no transfer
    with override(guard_transfers="error"):  # what LAZYCORE_GUARD_TRANSFERS=error sets
        with pytest.raises(GuardError):
            np.asarray(a)
        with guard(transfers="allow"):  # the region overrides the global setting
            assert np.asarray(a).tolist() == [1.5, 1.5, 1.5]
        with pytest.raises(GuardError):
            np.asarray(a)
    with pytest.raises(ValueError, match="guard transfers= must be one of"):
        with guard(transfers="never"):
            pass
    with pytest.raises(ValueError, match="guard_compiles must be one of"):
        lazycore.config.configure(guard_compiles="sometimes")
