"""The README's main command runs and reports a match (a short run)."""

import importlib.util
import pathlib


def test_training_demo_matches_eager(capsys):
    path = pathlib.Path(__file__).parents[2] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--steps", "30", "--every", "10"]) == 0
    out = capsys.readouterr().out
    # the traced step's programs (3) and the captured step's steady program: a
    # captured step runs as one call node, its own program (its first call,
    # which makes Adam's state, shares the traced first step's)
    assert "OK: lazy training matches eager" in out and "fallbacks=0" in out and "compiles=4" in out
