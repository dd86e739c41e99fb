#!/usr/bin/env python3
"""Regenerates data/swebench-specs.json from the `swebench` package.

onebash grades SWE-bench instances the way SWE-bench's own harness does:
the per-repo, per-version test command and eval steps, and the name of
the log parser each repo's output is read with. Those live in the
`swebench` package (4.x keeps them in one place:
`swebench.harness.constants.MAP_REPO_VERSION_TO_SPECS` and
`swebench.harness.log_parsers.MAP_REPO_TO_PARSER`). This script writes
them out as data, which onebash embeds; onebash needs no Python at run
time.

    python3 -m venv /tmp/swebench-venv
    /tmp/swebench-venv/bin/pip install swebench==4.1.0
    /tmp/swebench-venv/bin/python scripts/swebench-specs.py

It refuses any other swebench version than PINNED: change both together,
and regenerate, when moving the pin.
"""

import json
import sys
from pathlib import Path

PINNED = "4.1.0"
OUT = Path(__file__).resolve().parent.parent / "data" / "swebench-specs.json"

# The spec keys the eval scripts use (harness/test_spec/python.py's
# make_eval_script_list_py: test_cmd, eval_commands, install; utils.py's
# make_eval_script_list_common, every other language's: build, test_cmd)
# and pre_install, which the image build ran.
KEYS = ("test_cmd", "eval_commands", "install", "pre_install", "build")


def main() -> int:
    import swebench
    from swebench.harness import constants
    from swebench.harness.constants import (
        FAIL_ONLY_REPOS,
        MAP_REPO_VERSION_TO_SPECS,
        NON_TEST_EXTS,
    )
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    if swebench.__version__ != PINNED:
        print(
            f"swebench {swebench.__version__} is installed; this script reads {PINNED}",
            file=sys.stderr,
        )
        return 1
    # Which language table each repo comes from: its eval script is built
    # by that language's code (Python's, JavaScript's, or the common one).
    languages = {}
    for name in dir(constants):
        prefix = "MAP_REPO_VERSION_TO_SPECS_"
        if name.startswith(prefix):
            for repo in getattr(constants, name):
                languages[repo] = name[len(prefix):].lower()
    repos = {}
    for repo in sorted(MAP_REPO_VERSION_TO_SPECS):
        parser = MAP_REPO_TO_PARSER.get(repo)
        versions = {}
        for version, spec in sorted(MAP_REPO_VERSION_TO_SPECS[repo].items()):
            versions[version] = {k: spec[k] for k in KEYS if k in spec}
        repos[repo] = {
            "language": languages.get(repo, "unknown"),
            "parser": parser.__name__ if parser else None,
            "versions": versions,
        }
    data = {
        "swebench_version": swebench.__version__,
        "generated_by": "scripts/swebench-specs.py",
        "env_activation": [
            "source /opt/miniconda3/bin/activate",
            "conda activate testbed",
        ],
        "repo_directory": "/testbed",
        "non_test_exts": list(NON_TEST_EXTS),
        "fail_only_repos": sorted(FAIL_ONLY_REPOS),
        "repos": repos,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({len(repos)} repos)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
