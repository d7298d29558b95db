"""CI's two xdist workers take whole files in the order tests/conftest.py gives them (scripts/dev
passes ``--no-loadscope-reorder``): the files tests/ci_durations.json lists first, longest first.
xdist's own order (most tests first) started the 200 s benchmark smoke file, one test, last."""

import importlib.util
import json
import pathlib
import re
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _conftest():
    spec = importlib.util.spec_from_file_location("_ci_order_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _items(*nodeids):
    return [types.SimpleNamespace(nodeid=n) for n in nodeids]


def test_listed_files_exist_and_the_test_command_keeps_the_order():
    seconds = json.loads((ROOT / "tests" / "ci_durations.json").read_text())
    assert seconds and all((ROOT / f).is_file() for f in seconds), [f for f in seconds if not (ROOT / f).is_file()]
    assert re.search(r"--dist loadfile --no-loadscope-reorder", (ROOT / "scripts" / "dev").read_text())


def test_a_worker_runs_the_listed_files_longest_first_and_keeps_each_file_whole():
    seconds = json.loads((ROOT / "tests" / "ci_durations.json").read_text())
    heavy, light = max(seconds, key=seconds.get), min(seconds, key=seconds.get)
    items = _items("tests/test_x.py::a", "tests/test_x.py::c", f"{light}::b", f"{heavy}::d[1]", f"{heavy}::d[2]",
                   "tests/test_y.py::e")
    _conftest().pytest_collection_modifyitems(types.SimpleNamespace(workerinput={}), items)
    assert [i.nodeid for i in items] == [f"{heavy}::d[1]", f"{heavy}::d[2]", f"{light}::b",
                                         "tests/test_x.py::a", "tests/test_x.py::c", "tests/test_y.py::e"]


def test_one_process_keeps_collection_order():
    seconds = json.loads((ROOT / "tests" / "ci_durations.json").read_text())
    items = _items("tests/test_x.py::a", f"{max(seconds, key=seconds.get)}::b")
    before = list(items)
    _conftest().pytest_collection_modifyitems(types.SimpleNamespace(), items)
    assert items == before
