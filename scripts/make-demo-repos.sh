#!/usr/bin/env bash
# Regenerate the demo task set of onebash:
#
#   tasks/demo/repos/calc.git      tiny Python package (bare git repository)
#   tasks/demo/repos/textkit.git   tiny bash project (bare git repository)
#   tasks/demo/tasks.jsonl         the tasks, with gold and test patches
#
# Everything is deterministic: fixed authors, emails and dates give the same
# commit ids on every run, and the patches are produced by `git diff` from
# edits made here, so they always apply at their base commit.
# Check the result with scripts/check-demo.sh.
#
# Needs: bash, git >= 2.32, python3.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEMO=$ROOT/tasks/demo
WORK=$(mktemp -d "${TMPDIR:-/tmp}/onebash-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/patches" "$DEMO/repos"

# A clean, fixed git environment: no user or system config, fixed identities.
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Ada Demo" GIT_AUTHOR_EMAIL="ada@example.com"
export GIT_COMMITTER_NAME="Ada Demo" GIT_COMMITTER_EMAIL="ada@example.com"
export TZ=UTC LC_ALL=C
umask 022

# commit DATE MESSAGE: commit everything in the working tree, print the sha.
commit() {
    git add -A
    GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" git commit -q -m "$2"
    git rev-parse HEAD
}

# replace FILE: stdin is OLD, a line "=====", NEW. OLD must occur exactly once.
REPLACE_PY='
import sys
path = sys.argv[1]
old, sep, new = sys.stdin.read().partition("=====\n")
if not sep:
    sys.exit("replace: missing ===== line")
text = open(path).read()
if text.count(old) != 1:
    sys.exit("replace: %s: expected one match, found %d" % (path, text.count(old)))
open(path, "w").write(text.replace(old, new))
'
replace() { python3 -c "$REPLACE_PY" "$1"; }

# save_patch NAME: store the working-tree change as a patch, then undo it.
save_patch() {
    git add -A
    git diff --cached --no-color --no-ext-diff >"$WORK/patches/$1.diff"
    [[ -s "$WORK/patches/$1.diff" ]] || { echo "empty patch: $1" >&2; exit 1; }
    git reset -q --hard
    git clean -fdq
}

# publish WORKDIR NAME: store WORKDIR as a minimal bare repo at repos/NAME.git.
publish() {
    local bare=$DEMO/repos/$2.git head
    head=$(git -C "$1" rev-parse refs/heads/main)
    rm -rf "$bare"
    git clone -q --bare --no-local "$1" "$bare"
    git -C "$bare" -c pack.threads=1 -c repack.writeBitmaps=false \
        -c pack.writeReverseIndex=false -c gc.writeCommitGraph=false \
        gc -q --aggressive --prune=now
    git -C "$bare" pack-refs --all
    rm -rf "$bare/hooks" "$bare/logs" "$bare/info" "$bare/branches" \
        "$bare/description" "$bare/objects/info" "$bare/FETCH_HEAD" "$bare/ORIG_HEAD"
    find "$bare" -name '*.sample' -delete
    printf 'ref: refs/heads/main\n' >"$bare/HEAD"
    printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n' >"$bare/config"
    # git (and libgit2) only accept a repository whose refs/ directory exists,
    # and an empty directory would be lost when the project itself is committed:
    # keep the branch as a loose ref too (same value as in packed-refs).
    rm -rf "$bare/refs"
    mkdir -p "$bare/refs/heads"
    printf '%s\n' "$head" >"$bare/refs/heads/main"
    # It must clone, and to the same commit.
    git clone -q "$bare" "$WORK/verify-$2"
    [[ $(git -C "$WORK/verify-$2" rev-parse HEAD) == "$head" ]]
    git -C "$bare" fsck --no-progress --no-dangling >/dev/null
}

###########################################################################
# calc: a tiny Python package
###########################################################################
git init -q -b main "$WORK/calc"
cd "$WORK/calc"
mkdir calc tests

cat >.gitignore <<'EOF'
__pycache__/
*.pyc
EOF

cat >README.md <<'EOF'
# calc

A tiny arithmetic library (Python 3, standard library only).

Run the tests with:

    python3 -m unittest discover -s tests -v
EOF

cat >calc/__init__.py <<'EOF'
"""calc: a tiny arithmetic library."""

from .ops import *  # noqa: F401,F403
EOF

cat >calc/ops.py <<'EOF'
"""Arithmetic helpers."""


def add(a, b):
    """Return a + b."""
    return a + b


def subtract(a, b):
    """Return a - b."""
    return a - b


def multiply(a, b):
    """Return a * b."""
    return a * b


def divide(a, b):
    """Return a / b."""
    try:
        return a / b
    except ZeroDivisionError:
        return 0
EOF

cat >tests/test_ops.py <<'EOF'
import unittest

import calc


class TestArithmetic(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)
        self.assertEqual(calc.add(-1, 1), 0)

    def test_subtract(self):
        self.assertEqual(calc.subtract(10, 4), 6)

    def test_multiply(self):
        self.assertEqual(calc.multiply(3, 4), 12)
        self.assertEqual(calc.multiply(-2, 5), -10)

    def test_divide(self):
        self.assertEqual(calc.divide(9, 3), 3)
        self.assertEqual(calc.divide(1, 4), 0.25)
EOF
CALC_C1=$(commit "2024-03-01T09:00:00+00:00" "Initial calc package with basic arithmetic")

# Task calc-divide-by-zero (base CALC_C1)
replace calc/ops.py <<'EOF'
def divide(a, b):
    """Return a / b."""
    try:
        return a / b
    except ZeroDivisionError:
        return 0
=====
def divide(a, b):
    """Return a / b. Raise ValueError when b is zero."""
    if b == 0:
        raise ValueError("division by zero")
    return a / b
EOF
save_patch calc-divide-by-zero.gold
cat >>tests/test_ops.py <<'EOF'

    def test_divide_by_zero(self):
        with self.assertRaises(ValueError) as ctx:
            calc.divide(1, 0)
        self.assertIn("zero", str(ctx.exception))
        with self.assertRaises(ValueError):
            calc.divide(0, 0)
        self.assertEqual(calc.divide(0, 5), 0)
EOF
save_patch calc-divide-by-zero.test

cat >>calc/ops.py <<'EOF'


def clamp(value, low, high):
    """Limit value to the closed range [low, high]."""
    if low > high:
        raise ValueError("low must not be greater than high")
    if value < low:
        return low
    if value > high:
        return low
    return value


def power(base, exponent):
    """Return base raised to the integer power exponent."""
    result = 1
    for _ in range(exponent):
        result *= base
    return result
EOF
cat >>tests/test_ops.py <<'EOF'


class TestClampPower(unittest.TestCase):
    def test_clamp_inside(self):
        self.assertEqual(calc.clamp(5, 0, 10), 5)

    def test_clamp_below(self):
        self.assertEqual(calc.clamp(-3, 0, 10), 0)

    def test_clamp_bad_range(self):
        with self.assertRaises(ValueError):
            calc.clamp(1, 10, 0)

    def test_power(self):
        self.assertEqual(calc.power(2, 10), 1024)
        self.assertEqual(calc.power(7, 0), 1)
EOF
CALC_C2=$(commit "2024-03-04T14:30:00+00:00" "Add clamp() and power()")

# Task calc-clamp-upper-bound (base CALC_C2)
replace calc/ops.py <<'EOF'
    if value > high:
        return low
=====
    if value > high:
        return high
EOF
save_patch calc-clamp-upper-bound.gold
cat >tests/test_clamp.py <<'EOF'
import unittest

import calc


class TestClampUpperBound(unittest.TestCase):
    def test_above_range(self):
        self.assertEqual(calc.clamp(15, 0, 10), 10)
        self.assertEqual(calc.clamp(2.5, -1.0, 1.0), 1.0)

    def test_on_bounds(self):
        self.assertEqual(calc.clamp(10, 0, 10), 10)
        self.assertEqual(calc.clamp(0, 0, 10), 0)

    def test_single_point_range(self):
        self.assertEqual(calc.clamp(99, 4, 4), 4)
        self.assertEqual(calc.clamp(-99, 4, 4), 4)
EOF
save_patch calc-clamp-upper-bound.test

# Task calc-power-negative-exponent (base CALC_C2)
replace calc/ops.py <<'EOF'
    """Return base raised to the integer power exponent."""
    result = 1
=====
    """Return base raised to the integer power exponent."""
    if exponent < 0:
        return 1 / power(base, -exponent)
    result = 1
EOF
save_patch calc-power-negative-exponent.gold
replace tests/test_ops.py <<'EOF'
        self.assertEqual(calc.power(7, 0), 1)
=====
        self.assertEqual(calc.power(7, 0), 1)

    def test_power_negative_exponent(self):
        self.assertAlmostEqual(calc.power(2, -2), 0.25)
        self.assertAlmostEqual(calc.power(10, -1), 0.1)
        self.assertAlmostEqual(calc.power(-2, -3), -0.125)
        self.assertIsInstance(calc.power(3, 2), int)
EOF
save_patch calc-power-negative-exponent.test

cat >>calc/ops.py <<'EOF'


def mean(values):
    """Return the arithmetic mean of a non-empty sequence of numbers."""
    values = list(values)
    if not values:
        raise ValueError("mean() of an empty sequence")
    return sum(values) // len(values)
EOF
cat >>tests/test_ops.py <<'EOF'


class TestMean(unittest.TestCase):
    def test_mean_whole(self):
        self.assertEqual(calc.mean([2, 4, 6]), 4)

    def test_mean_fraction(self):
        self.assertEqual(calc.mean([1, 2, 3, 4]), 2.5)
        self.assertAlmostEqual(calc.mean([0.1, 0.2]), 0.15)

    def test_mean_empty(self):
        with self.assertRaises(ValueError):
            calc.mean([])
EOF
CALC_C3=$(commit "2024-03-07T11:15:00+00:00" "Add mean() with tests")

# Task calc-mean-float (base CALC_C3, the existing tests catch it)
replace calc/ops.py <<'EOF'
    return sum(values) // len(values)
=====
    return sum(values) / len(values)
EOF
save_patch calc-mean-float.gold

###########################################################################
# textkit: a tiny bash project
###########################################################################
git init -q -b main "$WORK/textkit"
cd "$WORK/textkit"
mkdir tests

cat >README.md <<'EOF'
# textkit

Small text helpers in plain bash. Source `textkit.sh`, or run it:

    ./textkit.sh slugify 'Hello World'     # hello-world

Run the tests with:

    bash tests/run.sh
EOF

cat >textkit.sh <<'EOF'
#!/usr/bin/env bash
# textkit: small text helpers. Source this file, or run it as
#   ./textkit.sh COMMAND [ARGS...]

# slugify TEXT: print TEXT in lower case, with every run of characters other
# than a-z and 0-9 replaced by a single dash, and no leading or trailing dash.
slugify() {
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]/-/g'
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    case "${1:-}" in
        slugify)
            "$@"
            ;;
        *)
            echo "usage: textkit.sh slugify TEXT" >&2
            exit 2
            ;;
    esac
fi
EOF
chmod +x textkit.sh

cat >tests/run.sh <<'EOF'
#!/usr/bin/env bash
# Plain bash tests for textkit.sh. Exits non-zero when any check fails.
set -u
export LC_ALL=C
cd "$(dirname "$0")/.."
. ./textkit.sh

checks=0
failures=0

# check NAME EXPECTED ACTUAL
check() {
    checks=$((checks + 1))
    if [[ "$2" == "$3" ]]; then
        printf 'ok   %s\n' "$1"
    else
        printf 'FAIL %s\n     expected: %q\n     actual:   %q\n' "$1" "$2" "$3"
        failures=$((failures + 1))
    fi
}

check "slugify simple" "hello-world" "$(slugify 'Hello World')"
check "slugify digits" "version-2" "$(slugify 'Version 2')"

echo "$checks checks, $failures failed"
[[ $failures -eq 0 ]]
EOF
chmod +x tests/run.sh
TEXTKIT_C1=$(commit "2024-04-02T08:00:00+00:00" "Initial textkit with slugify")

# Task textkit-slugify (base TEXTKIT_C1)
replace textkit.sh <<'EOF'
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]/-/g'
=====
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' |
        sed -E -e 's/[^a-z0-9]+/-/g' -e 's/^-//' -e 's/-$//'
EOF
save_patch textkit-slugify.gold
replace tests/run.sh <<'EOF'
check "slugify digits" "version-2" "$(slugify 'Version 2')"
=====
check "slugify digits" "version-2" "$(slugify 'Version 2')"
check "slugify runs" "rust-bash" "$(slugify 'Rust & Bash')"
check "slugify punctuation" "hello-world" "$(slugify '  Hello,   World!  ')"
check "slugify separators only" "" "$(slugify ' -- ')"
check "slugify already a slug" "a-b-c" "$(slugify 'a-b-c')"
EOF
save_patch textkit-slugify.test

replace textkit.sh <<'EOF'
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]/-/g'
}
=====
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]/-/g'
}

# reverse_lines: print the lines of standard input in reverse order, like tac.
reverse_lines() {
    local lines=() line i
    while IFS= read -r line; do
        lines+=("$line")
    done
    for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
        printf '%s\n' "${lines[i]}"
    done
}
EOF
replace textkit.sh <<'EOF'
        slugify)
=====
        slugify | reverse_lines)
EOF
replace textkit.sh <<'EOF'
            echo "usage: textkit.sh slugify TEXT" >&2
=====
            echo "usage: textkit.sh {slugify TEXT | reverse_lines}" >&2
EOF
replace tests/run.sh <<'EOF'

echo "$checks checks, $failures failed"
=====
check "reverse_lines" $'c\nb\na' "$(printf 'a\nb\nc\n' | reverse_lines)"
check "reverse_lines empty input" "" "$(reverse_lines </dev/null)"

echo "$checks checks, $failures failed"
EOF
TEXTKIT_C2=$(commit "2024-04-05T16:20:00+00:00" "Add reverse_lines command")

# Task textkit-reverse-lines (base TEXTKIT_C2)
replace textkit.sh <<'EOF'
    while IFS= read -r line; do
=====
    while IFS= read -r line || [[ -n "$line" ]]; do
EOF
save_patch textkit-reverse-lines.gold
replace tests/run.sh <<'EOF'
check "reverse_lines empty input" "" "$(reverse_lines </dev/null)"
=====
check "reverse_lines empty input" "" "$(reverse_lines </dev/null)"
check "reverse_lines no final newline" $'c\nb\na' "$(printf 'a\nb\nc' | reverse_lines)"
check "reverse_lines single line" "only" "$(printf 'only' | reverse_lines)"
check "reverse_lines blank lines" $'b\n\na' "$(printf 'a\n\nb\n' | reverse_lines)"
check "reverse_lines ends with newline" "2" "$(printf 'x\ny' | reverse_lines | wc -l | tr -d ' ')"
EOF
save_patch textkit-reverse-lines.test

replace textkit.sh <<'EOF'
    done
}
=====
    done
}

# word_count TEXT: print the number of words in TEXT. Words are separated by
# any run of whitespace.
word_count() {
    printf '%s\n' "$1" | tr ' ' '\n' | wc -l | tr -d ' '
}
EOF
replace textkit.sh <<'EOF'
        slugify | reverse_lines)
=====
        slugify | reverse_lines | word_count)
EOF
replace textkit.sh <<'EOF'
            echo "usage: textkit.sh {slugify TEXT | reverse_lines}" >&2
=====
            echo "usage: textkit.sh {slugify TEXT | reverse_lines | word_count TEXT}" >&2
EOF
replace tests/run.sh <<'EOF'

echo "$checks checks, $failures failed"
=====
check "word_count simple" "3" "$(word_count 'one two three')"
check "word_count extra spaces" "2" "$(word_count '  hello   world ')"
check "word_count tab and newline" "3" "$(word_count $'one\ttwo\nthree')"
check "word_count empty" "0" "$(word_count '')"

echo "$checks checks, $failures failed"
EOF
TEXTKIT_C3=$(commit "2024-04-09T10:45:00+00:00" "Add word_count with tests")

# Task textkit-word-count (base TEXTKIT_C3, the existing tests catch it)
replace textkit.sh <<'EOF'
    printf '%s\n' "$1" | tr ' ' '\n' | wc -l | tr -d ' '
=====
    printf '%s\n' "$1" | wc -w | tr -d ' '
EOF
save_patch textkit-word-count.gold

###########################################################################
# Bare repositories and the task file
###########################################################################
cd "$ROOT"
publish "$WORK/calc" calc
publish "$WORK/textkit" textkit

export CALC_C1 CALC_C2 CALC_C3 TEXTKIT_C1 TEXTKIT_C2 TEXTKIT_C3
python3 - "$WORK/patches" "$DEMO/tasks.jsonl.tmp" <<'PY'
import json
import os
import sys

patches, out = sys.argv[1], sys.argv[2]
env = os.environ

CALC_TESTS = "python3 -m unittest discover -s tests -v"
TEXTKIT_TESTS = "bash tests/run.sh"

TASKS = [
    dict(
        id="calc-divide-by-zero",
        repo="repos/calc.git",
        base_commit=env["CALC_C1"],
        problem_statement="""\
calc.divide() silently returns 0 when dividing by zero

`divide(1, 0)` returns `0` instead of failing, so a bad input turns into a
plausible-looking wrong result far away from the mistake:

    >>> import calc
    >>> calc.divide(1, 0)
    0

Expected: `divide(a, 0)` raises `ValueError`, with a message that mentions
division by zero (for example "division by zero"). This includes `divide(0, 0)`.
Dividing zero by a non-zero number must still return 0, and all other results
must stay the same.
""",
        test_command=CALC_TESTS,
        test_patch="calc-divide-by-zero.test",
        gold_patch="calc-divide-by-zero.gold",
        metadata={"difficulty": "easy", "language": "python"},
    ),
    dict(
        id="calc-clamp-upper-bound",
        repo="repos/calc.git",
        base_commit=env["CALC_C2"],
        problem_statement="""\
calc.clamp() returns the lower bound for values above the range

    >>> import calc
    >>> calc.clamp(15, 0, 10)
    0

A value above `high` should be clamped to `high` (10 here), not to `low`.
Values inside the range or on its bounds must come back unchanged, values
below `low` must still give `low`, and `low > high` must still raise
`ValueError`.
""",
        test_command=CALC_TESTS,
        test_patch="calc-clamp-upper-bound.test",
        gold_patch="calc-clamp-upper-bound.gold",
    ),
    dict(
        id="calc-power-negative-exponent",
        repo="repos/calc.git",
        base_commit=env["CALC_C2"],
        problem_statement="""\
calc.power() returns 1 for negative exponents

`calc.power(2, -2)` returns `1`, but it should return `0.25`.

`power(base, exponent)` should support negative integer exponents and return
`1 / base ** -exponent` for them (a float). Results for exponents >= 0 must not
change: integer inputs must keep giving integer results.
""",
        test_command=CALC_TESTS,
        test_patch="calc-power-negative-exponent.test",
        gold_patch="calc-power-negative-exponent.gold",
        metadata={"difficulty": "easy", "language": "python"},
    ),
    dict(
        id="calc-mean-float",
        repo="repos/calc.git",
        base_commit=env["CALC_C3"],
        problem_statement="""\
calc.mean() rounds its result down to an integer

`calc.mean([1, 2, 3, 4])` returns `2` instead of `2.5`, and
`calc.mean([0.1, 0.2])` returns `0.0`. The test suite already shows the failure:

    python3 -m unittest discover -s tests -v

`mean()` should return the exact arithmetic mean. An empty sequence must still
raise `ValueError`.
""",
        test_command=CALC_TESTS,
        gold_patch="calc-mean-float.gold",
    ),
    dict(
        id="textkit-slugify",
        repo="repos/textkit.git",
        base_commit=env["TEXTKIT_C1"],
        problem_statement="""\
slugify leaves repeated, leading and trailing dashes

    $ ./textkit.sh slugify '  Hello,   World!  '
    --hello----world---

Expected `hello-world`. As the comment above the function says, every run of
characters other than `a-z` and `0-9` must become a single dash, and the result
must not start or end with a dash (text made only of separators gives an empty
line). Simple cases such as `slugify 'Hello World'` -> `hello-world` must keep
working. Tests: `bash tests/run.sh`.
""",
        test_command=TEXTKIT_TESTS,
        test_patch="textkit-slugify.test",
        gold_patch="textkit-slugify.gold",
    ),
    dict(
        id="textkit-reverse-lines",
        repo="repos/textkit.git",
        base_commit=env["TEXTKIT_C2"],
        problem_statement="""\
reverse_lines drops the last line when the input has no final newline

    $ printf 'a\\nb\\nc' | ./textkit.sh reverse_lines
    b
    a

Expected:

    c
    b
    a

Like `tac`, every line of the input must be printed, including a last line
that is not terminated by a newline. Each output line ends with a newline.
Input that ends with a newline, and empty lines, already work and must keep
working. Tests: `bash tests/run.sh`.
""",
        test_command=TEXTKIT_TESTS,
        test_patch="textkit-reverse-lines.test",
        gold_patch="textkit-reverse-lines.gold",
        test_timeout_s=60,
    ),
    dict(
        id="textkit-word-count",
        repo="repos/textkit.git",
        base_commit=env["TEXTKIT_C3"],
        problem_statement="""\
word_count miscounts text with extra whitespace

`word_count '  hello   world '` prints `7` and `word_count ''` prints `1`;
they should print `2` and `0`. Words are separated by any run of whitespace
(spaces, tabs, newlines), so `word_count $'one\\ttwo\\nthree'` should print `3`.
`bash tests/run.sh` already shows the failing checks.
""",
        test_command=TEXTKIT_TESTS,
        gold_patch="textkit-word-count.gold",
    ),
]


def read_patch(name):
    with open(os.path.join(patches, name + ".diff"), encoding="utf-8") as f:
        return f.read()


with open(out, "w", encoding="utf-8") as f:
    for task in TASKS:
        for key in ("test_patch", "gold_patch"):
            if key in task:
                task[key] = read_patch(task[key])
        f.write(json.dumps(task) + "\n")
PY
mv "$DEMO/tasks.jsonl.tmp" "$DEMO/tasks.jsonl"

echo "calc.git     main = $CALC_C3"
echo "textkit.git  main = $TEXTKIT_C3"
echo "wrote $DEMO/tasks.jsonl ($(wc -l <"$DEMO/tasks.jsonl") tasks)"
