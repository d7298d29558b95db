#!/usr/bin/env bash
# Run the Array API standard's conformance suite (data-apis/array-api-tests)
# against one namespace module and print pass/fail counts per test file.
# Not run in CI: it takes minutes and needs hypothesis + ndindex
# (`.venv/bin/pip install hypothesis ndindex pytest-json-report`).
#
#   scripts/array_api_conformance.sh [MODULE] [SUITE_DIR]
#     MODULE     lazycore.numpy (default) or numpy, for the baseline
#     SUITE_DIR  a checkout of array-api-tests with its array-api submodule;
#                made from the local mirrors when absent
# Environment: MAX_EXAMPLES (5), FILE_TIMEOUT seconds per test file (900),
#   VERSION (2024.12), FILES (test file names, default every test_*.py),
#   PYTHON (.venv/bin/python), REPORT_DIR (where per-file logs go),
#   SKIP_DTYPES (e.g. complex64,complex128: the suite's own switch, to count
#   what fails for a missing dtype apart).
set -uo pipefail

MODULE=${1:-lazycore.numpy}
SUITE=${2:-/tmp/array-api-tests}
VERSION=${VERSION:-2024.12}
MAX_EXAMPLES=${MAX_EXAMPLES:-5}
FILE_TIMEOUT=${FILE_TIMEOUT:-900}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
MIRROR=${MIRROR:-/work/.mirror}
REPORT_DIR=${REPORT_DIR:-/tmp/array-api-report-${MODULE//./_}}

if [ ! -d "$SUITE/array_api_tests" ]; then
    git clone -q "$MIRROR/data-apis+array-api-tests/repo" "$SUITE" || exit 1
    pinned=$(git -C "$SUITE" ls-tree HEAD array-api | awk '{print $3}')
    rmdir "$SUITE/array-api" 2>/dev/null
    git clone -q "$MIRROR/data-apis+array-api/repo" "$SUITE/array-api" || exit 1
    git -C "$SUITE/array-api" checkout -q "$pinned" || exit 1
fi

# The suite assumes one complex dtype at least: with both skipped, dtype_helpers'
# widest_complex_dtype takes max() of an empty tuple and test_signatures looks
# its name up. Let it be None, and the signature tests name complex128 instead
# (never chosen then: it is in no accepted-dtype list).
sed -i 's/key=lambda x: x\[1\]$/key=lambda x: x[1], default=(None,)/' \
    "$SUITE/array_api_tests/dtype_helpers.py"
sed -i 's/cmplx_name = dh.dtype_to_name\[dh.widest_complex_dtype\]$/& if dh.widest_complex_dtype is not None else "complex128"/' \
    "$SUITE/array_api_tests/test_signatures.py"

# No shrinking of failing examples: the counts are the same, and shrinking is what
# makes a failing test slow (each example here compiles a program). No too_slow
# health check either: a lazy namespace compiles on first use, so the suite's
# strategies that call it (test_pinv's) draw slowly; speed is not conformance.
"$PYTHON" - "$SUITE/conftest.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
if "Phase.shrink" not in text:
    text = text.replace("from hypothesis import settings", "from hypothesis import HealthCheck, Phase, settings")
    text = text.replace("        deadline=deadline,\n    )",
                        "        deadline=deadline,\n        phases=[p for p in Phase if p is not Phase.shrink],\n"
                        "        suppress_health_check=[HealthCheck.too_slow],\n    )")
    open(path, "w").write(text)
PY

mkdir -p "$REPORT_DIR"
cd "$SUITE" || exit 1
files=${FILES:-$(cd array_api_tests && ls test_*.py)}
total_pass=0; total_fail=0; total_skip=0; total_err=0
printf '%-48s %6s %6s %6s %6s\n' file passed failed skipped errors
for f in $files; do
    log="$REPORT_DIR/${f%.py}.log"
    ARRAY_API_TESTS_MODULE=$MODULE ARRAY_API_TESTS_VERSION=$VERSION \
        ARRAY_API_TESTS_SKIP_DTYPES=${SKIP_DTYPES:-} \
        timeout "$FILE_TIMEOUT" "$PYTHON" -m pytest "array_api_tests/$f" -q -p no:cacheprovider \
        --max-examples "$MAX_EXAMPLES" --hypothesis-disable-deadline -rf --tb=line >"$log" 2>&1
    rc=$?
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$log" | tail -1)
    count() { echo "$line" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
    p=$(count passed); fl=$(count failed); s=$(count skipped); e=$(count 'errors?')
    [ "$rc" = 124 ] && e="timeout"
    [ -z "$line" ] && [ "$rc" != 124 ] && e="load"
    printf '%-48s %6s %6s %6s %6s\n' "$f" "$p" "$fl" "$s" "$e"
    total_pass=$((total_pass + p)); total_fail=$((total_fail + fl)); total_skip=$((total_skip + s))
    [[ "$e" =~ ^[0-9]+$ ]] && total_err=$((total_err + e))
done
printf '%-48s %6s %6s %6s %6s\n' TOTAL "$total_pass" "$total_fail" "$total_skip" "$total_err"
echo "per-file logs (failures listed with -rf): $REPORT_DIR"
