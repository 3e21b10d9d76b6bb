"""Every example on every page runs as written, in a fresh interpreter.

Sphinx's doctest builder runs the pages with a shared setup (``import numpy as np``, ``import
numred``), which hides an example that forgets an import; a reader pasting the page into Python has
no such setup. Here each page (the README and every page of docs/) runs in a new interpreter with
nothing imported: its ``>>>`` examples (MyST ```{doctest}``` and ```pycon``` fences, reST doctest
blocks) and its ```python``` blocks, in page order, in one namespace, as a reader would type them.
Each public docstring's examples run the same way, in a namespace of their own.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("*.rst")])

# Run in the child: read one page, turn it into doctest examples (```python blocks become one
# example each, expected to print nothing), run them with Sphinx's default doctest flags.
_RUN_PAGE = r'''
import doctest, re, sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text()
parser = doctest.DocTestParser()
examples = []
if path.suffix == ".md":
    for lang, body in re.findall(r"^```+ *(\{doctest\}|pycon|python|py)[^\n]*\n(.*?)^```+ *$", text, re.M | re.S):
        if ">>>" in body:
            examples += parser.get_examples(body)
        else:  # a plain code block: the whole block is one statement list that must run
            examples.append(doctest.Example(body, ""))
else:  # reST: doctest blocks and .. doctest:: directives, indented or not
    examples = parser.get_examples(text)
flags = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1
test = doctest.DocTest(examples, {}, path.name, str(path), 0, None)
runner = doctest.DocTestRunner(optionflags=flags)
runner.run(test)
print(f"{len(examples)} examples", file=sys.stderr)
sys.exit(1 if runner.failures else 0)
'''

_RUN_DOCSTRINGS = r'''
import doctest, importlib, sys

module = importlib.import_module(sys.argv[1])
flags = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1
runner = doctest.DocTestRunner(optionflags=flags)
count = 0
for test in doctest.DocTestFinder().find(module):
    test.globs = {}  # not the module's namespace: a docstring example imports what it uses
    count += len(test.examples)
    runner.run(test)
print(f"{count} examples", file=sys.stderr)
sys.exit(1 if runner.failures or not count else 0)
'''


def _run(script: str, arg: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, arg], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_examples_run_in_a_fresh_interpreter(page):
    done = _run(_RUN_PAGE, str(page))
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("module", ["numred", "numred.onnx"])
def test_docstring_examples_run_without_a_shared_setup(module):
    pytest.importorskip("onnx")
    done = _run(_RUN_DOCSTRINGS, module)
    assert done.returncode == 0, f"{module}:\n{done.stdout}\n{done.stderr}"


def test_the_checker_catches_a_missing_import(tmp_path):
    # the bug this file is for: docs/onnx.md once used np without importing it
    page = tmp_path / "page.md"
    page.write_text("```{doctest}\n>>> import numred\n>>> numred.reduce_mean(np.float32([1, 2]))\n"
                    "array([1.5], dtype=float32)\n```\n")
    done = _run(_RUN_PAGE, str(page))
    assert done.returncode == 1 and "NameError: name 'np' is not defined" in done.stdout


# ---- the README is a user's page ----------------------------------------------------------------

README = (ROOT / "README.md").read_text()
# the two set-up commands for a fresh machine, exactly (.ci/run runs the first)
SETUP_COMMANDS = ('pip install ".[test]" && python -m pytest', "pip install . && python -m numred bench")


def test_the_readme_is_short_and_keeps_the_two_setup_commands():
    assert len(README.split()) <= 1200
    for command in SETUP_COMMANDS:
        assert f"```\n{command}\n```" in README, command
    assert SETUP_COMMANDS[0] in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pages_describe_the_product_not_work_sessions(page):
    # history belongs in the changelog by version and date, not as a diary of who did what when
    assert not re.search(r"(?i)\bsessions?\b", page.read_text()), page.name
