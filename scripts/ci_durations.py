"""Write tests/ci_durations.json from a CI run's JUnit XML (``pytest --junitxml``).

CI's two workers take whole test files (``--dist loadfile``) in the order
tests/conftest.py gives them: the files listed here first, longest first, so
the last file to start is a short one and both workers finish together.
Only files of at least ``--min`` seconds are listed; the rest follow in
collection order. Regenerate when a heavy file's time changes much:

    python scripts/ci_durations.py run.xml > tests/ci_durations.json
"""

import argparse
import collections
import json
import xml.etree.ElementTree as ET


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("junit")
    p.add_argument("--min", type=float, default=20.0, help="list files of at least this many seconds")
    a = p.parse_args(argv)
    seconds = collections.Counter()
    for case in ET.parse(a.junit).getroot().iter("testcase"):
        # classname is the module's dotted path (tests.torch.test_opinfo) for module-level tests
        module = case.get("classname", "").split(".")
        while module and not module[-1].startswith("test"):
            module.pop()  # (a test class's name)
        seconds["/".join(module) + ".py"] += float(case.get("time") or 0)
    heavy = {f: round(s) for f, s in seconds.most_common() if s >= a.min}
    print(json.dumps(heavy, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
