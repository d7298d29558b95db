"""scripts/gpu_check.py: its two halves meet (export with lazycore, run with
jaxlib alone), here on the CPU; on a GPU machine ``run --platform gpu`` is the
check (figures in docs/guides/export.md)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check.py"


def test_exported_programs_run_in_a_process_without_lazycore_with_its_answers(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    gpu_check.export(tmp_path, only="axpy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["axpy_float32", "axpy_float64"]

    done = subprocess.run([sys.executable, str(SCRIPT), "run", str(tmp_path), "--platform", "cpu", "--only", "axpy"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if " result 0: " in line]
    assert len(lines) == 2, done.stdout
    for line in lines:  # the same program on the same backend: lazycore's bits
        assert "vs lazycore where exported 0/262144 differ" in line, line
