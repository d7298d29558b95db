# lit configuration for lazycore: each test is MLIR with RUN lines piping
# through `lazy-opt` into `filecheck`, or Python (`frontends/`: `%PYTHON %s`)
# printing the IR of small torch and NumPy programs.
import os
import shutil
import sys

import lit.formats

config.name = "lazycore"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

# Tools come from the environment lazycore is installed in (the venv running lit).
bindir = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(bindir, name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("lazy-opt", tool("lazy-opt")))
config.substitutions.append(("filecheck", tool("filecheck")))
config.substitutions.append(("FileCheck", tool("filecheck")))
config.environment["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# Python tests compile programs: no persistent compile cache (a program
# another run left would load instead, and the user's cache stays untouched).
config.environment["LAZYCORE_CACHE_DIR"] = "off"
