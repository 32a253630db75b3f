"""Ray Data's own tests of its map operations, run plain and instrumented: what differs.

Issue 40's fidelity measurement, the sibling of ``compare.py`` (issue 27) for Ray Data: the
UDFs passed to ``map_batches``, ``map``, ``flat_map``, ``filter``, ``add_column`` and
``GroupedData.map_groups`` are wrapped under ``instrument()``, and Ray Data's own tests of
those operations should pass or fail the same instrumented as they do plain.

The files are Ray's code and stay out of this repository: fetch them first into a folder
(README.md says how and which versions), then point this script at it. It checks each file
against ``SOURCES`` (present, complete, parses), builds a work folder under the system temp
dir, and runs each test file twice, one pytest at a time: plain, then with
``--raytrace-instrument`` (raytrace_kit's pytest plugin calling ``instrument()`` at session
start, as ``raytrace-kit run`` does). Only the tests in ``SELECT`` run. It prints, per file,
the tests that ran, how many passed each way, and every test whose outcome differs.

The work folder holds the test files; ``_ray_data_tests/`` (``ray.data.tests``: the fetched
``util.py``, ``data_fixtures.py`` as its ``conftest.py``, ``test_util.py`` with the
``ConcurrencyCounter`` the tests import); ``_ray_tests/`` (``ray.tests``, whose
``conftest`` re-exports the same fixtures); ``_site/sitecustomize.py``
(``data_sitecustomize.py``: makes both packages importable in pytest and in every Ray
worker); and ``data_conftest.py`` as ``conftest.py`` (the selection, a time limit per test
phase).

Run:
  python benchmarks/ray_tests/data_compare.py --files /tmp/ray_data_tests_src
  python benchmarks/ray_tests/data_compare.py --files /tmp/ray_data_tests_src \
      --only test_map.py --keep
  python benchmarks/ray_tests/data_compare.py --files /tmp/ray_data_tests_src \
      --only test_map.py --tests test_add_column test_transform_failure
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare import (
    ERROR,
    FAILED,
    REPO,
    Run,
    Source,
    print_table,
    read_junit,
    same_words,
    status,
)

HERE = Path(__file__).parent

# What README.md says to fetch: each file's path in ray-project/ray, the stored commit
# read, and its length in characters (a short file is a fetch cut off).
SOURCES = {
    "test_map.py": Source(
        "python/ray/data/tests/test_map.py", "00dfa45e8435a0bff3f71148fa2fab3ea1c85f0c", 32442
    ),
    "test_map_batches.py": Source(
        "python/ray/data/tests/test_map_batches.py",
        "06a07edef7a168b1828ae5432d7c2595a5072d4c",
        27760,
    ),
    "test_groupby_e2e.py": Source(
        "python/ray/data/tests/test_groupby_e2e.py",
        "0572ad57561e5e2f3e70f72354f05fa94bac6ef9",
        41897,
    ),
    "util.py": Source(
        "python/ray/data/tests/util.py", "07128d36af1c75f63d8bf3356312ff7a45e711c7", 6024
    ),
}
TEST_FILES = [name for name in SOURCES if name.startswith("test_")]

# The tests run, by file: each name with every parametrized case of it. What the fetched
# files hold beyond these is left out (``NOT_CHOSEN`` says why), in both runs alike.
SELECT = {
    "test_map.py": [
        "test_basic_actors",
        "test_callable_classes",
        "test_concurrent_callable_classes",
        "test_transform_failure",
        "test_actor_task_failure",
        "test_concurrency",
        "test_flat_map_generator",
        "test_add_column",
        "test_select_columns",
        "test_map_batches_basic",
        "test_map_batches_extra_args",
        "test_map_with_memory_resources",
        "test_map_batches_generator",
        "test_map_batches_actors_preserves_order",
        "test_map_batches_batch_mutation",
        "test_map_batches_batch_zero_copy",
        "test_map_batches_block_bundling_skewed_manual",
        "test_map_with_mismatched_columns",
        "test_map_batches_preserve_empty_blocks",
        "test_map_batches_combine_empty_blocks",
        "test_map_batches_preserves_empty_block_format",
        "test_actor_pool_strategy_default_num_actors",
        "test_actor_pool_strategy_bundles_to_max_actors",
        "test_nonserializable_map_batches",
    ],
    "test_map_batches.py": [
        "test_map_batches_basic",
        "test_map_batches_extra_args",
        "test_map_with_memory_resources",
        "test_map_batches_generator",
        "test_map_batches_batch_mutation",
        "test_map_batches_batch_zero_copy",
        "test_map_batches_block_bundling_skewed_manual",
        "test_map_batches_preserve_empty_blocks",
        "test_map_batches_combine_empty_blocks",
        "test_map_batches_timestamp_nanosecs",
        "test_map_batches_async_exception_propagation",
        "test_map_batches_async_generator_fast_yield",
        "test_map_batches_struct_field_type_divergence",
        "test_map_batches_sync_udf_with_asyncio_run_chained_with_async_actor",
    ],
    "test_groupby_e2e.py": [
        "test_map_groups_with_gpus",
        "test_map_groups_with_actors",
        "test_map_groups_with_actors_and_args",
        "test_arrow_nan_element",
        "test_groupby_nans",
        "test_groupby_map_groups_for_none_groupkey",
        "test_groupby_map_groups_perf",
        "test_groupby_map_groups_for_pandas",
        "test_groupby_map_groups_for_arrow",
        "test_groupby_map_groups_for_numpy",
        "test_groupby_map_groups_with_different_types",
        "test_groupby_map_groups_multiple_batch_formats",
        "test_groupby_map_groups_ray_remote_args_fn",
        "test_groupby_map_groups_extra_args",
        "test_groupby_map_groups_multicolumn",
        "test_groupby_map_groups_multicolumn_with_nan",
        "test_groupby_map_groups_with_partial",
        "test_map_groups_generator_udf",
    ],
}
_NO_UDF = "no UDF of the test's own (Ray Data's aggregations, column selection, sampling)"
NOT_CHOSEN = {
    "test_map.py::test_map_batches_block_bundling_auto": (
        "56 cases of one lambda's block bundling; skewed_manual covers it in 8"
    ),
    "test_map.py::test_map_batches_block_bundling_skewed_auto": "261 cases, as above",
    "test_map_batches.py::test_map_batches_block_bundling_auto": "as in test_map.py",
    "test_map_batches.py::test_map_batches_block_bundling_skewed_auto": "as in test_map.py",
    "test_map.py::test_drop_columns, test_random_sample, test_random_sample_checks": _NO_UDF,
    "test_groupby_e2e.py::test_groupby_large_udf_returns": (
        "1024 returns of 128 MiB each: far beyond this machine's memory and time"
    ),
    "test_groupby_e2e.py (aggregations, with_column expressions, repr)": _NO_UDF,
}


def check_sources(files: Path, needed: list[str]) -> list[str]:
    """What is wrong with the fetched files run (``needed``): missing, cut short, not Python."""
    problems = []
    for name, source in SOURCES.items():
        if name not in needed:
            continue
        path = files / name
        if not path.exists():
            problems.append(f"{name}: missing (fetch {REPO} {source.path} @ {source.commit})")
            continue
        text = path.read_text()
        if len(text) != source.chars:
            problems.append(f"{name}: {len(text)} characters, the stored file has {source.chars}")
        try:
            ast.parse(text, name)
        except SyntaxError as error:
            problems.append(f"{name}: does not parse ({error})")
    return problems


def build_workdir(files: Path, workdir: Path, test_files: list[str]) -> None:
    """The tests, ``ray.data.tests`` and ``ray.tests`` beside them, the site hook, the conftest."""
    for name in test_files:
        shutil.copy(files / name, workdir / name)
    data_tests = workdir / "_ray_data_tests"
    data_tests.mkdir(exist_ok=True)
    (data_tests / "__init__.py").write_text("")
    shutil.copy(files / "util.py", data_tests / "util.py")
    shutil.copy(HERE / "data_fixtures.py", data_tests / "conftest.py")
    (data_tests / "test_util.py").write_text(
        "from ray.data.tests.conftest import ConcurrencyCounter  # noqa: F401\n"
    )
    core_tests = workdir / "_ray_tests"
    core_tests.mkdir(exist_ok=True)
    (core_tests / "__init__.py").write_text("")
    (core_tests / "conftest.py").write_text("from ray.data.tests.conftest import *  # noqa\n")
    site = workdir / "_site"
    site.mkdir(exist_ok=True)
    shutil.copy(HERE / "data_sitecustomize.py", site / "sitecustomize.py")
    shutil.copy(HERE / "data_conftest.py", workdir / "conftest.py")
    (workdir / "pytest.ini").write_text("[pytest]\n")  # no ini file of anyone else's applies


def run_pytest(workdir: Path, test_file: str, with_kit: bool, limits: argparse.Namespace) -> Run:
    """One pytest process over one file, in its own session so a timeout ends all of it."""
    label = "kit" if with_kit else "plain"
    chosen = [name for name in SELECT[test_file] if not limits.tests or name in limits.tests]
    junit = workdir / f"{Path(test_file).stem}.{label}.xml"
    log = workdir / f"{Path(test_file).stem}.{label}.log"
    command = [
        sys.executable,
        "-m",
        "pytest",
        test_file,
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        "-q",
        "-rN",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(workdir / "_site"), os.environ.get("PYTHONPATH")])
        ),
        "RAY_DATA_TESTS_DIR": str(workdir),
        "RAY_TESTS_TIMEOUT": str(limits.test_timeout),
        "RAY_TESTS_SELECT": json.dumps({test_file: chosen}),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAYTRACE_KIT_INSTRUMENT", None)
    if with_kit:
        command.append("--raytrace-instrument")
        # The helpers of ray.data.tests (column_udf_class, ...) count as the test's code.
        env["RAYTRACE_KIT_INSTRUMENT"] = "include=ray.data.tests.*"
    start = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        note = ""
        try:
            process.wait(timeout=limits.file_timeout)
        except subprocess.TimeoutExpired:
            note = f"stopped after {limits.file_timeout} s"
        finally:
            if process.poll() is None:  # timed out, or this script was interrupted
                os.killpg(process.pid, signal.SIGKILL)  # the session this script started
                process.wait()
    seconds = time.monotonic() - start
    outcomes = read_junit(junit) if junit.exists() else {}
    if not outcomes and not note:
        note = f"no results (exit {process.returncode}; see {log})"
    return Run(outcomes, "", seconds, note)


def report(results: dict[str, tuple[Run, Run]]) -> None:
    """The table, every difference, what failed both ways, each run, what was not chosen."""
    differences = print_table(results)
    print(f"\ndifferences ({len(differences)}):")
    for node, plain, kit in differences:
        print(f"  {node}: plain {status(plain, node)}, kit {status(kit, node)}")
        for label, run in (("plain", plain), ("kit", kit)):
            outcome = run.outcomes.get(node)
            if outcome is not None and outcome.message:
                print(f"    {label}: {outcome.message}")

    print("\nfailed both ways (the plain message; the kit's too where it reads otherwise):")
    for plain, kit in results.values():
        for node in sorted(plain.outcomes):
            if {status(plain, node), status(kit, node)} <= {FAILED, ERROR}:
                print(f"  {node}: {plain.outcomes[node].message}")
                if not same_words(plain.outcomes[node].message, kit.outcomes[node].message):
                    print(f"    kit: {kit.outcomes[node].message}")

    print("\nruns:")
    for test_file, (plain, kit) in results.items():
        for label, run in (("plain", plain), ("kit", kit)):
            extra = f"; {run.note}" if run.note else ""
            print(f"  {test_file} {label}: {run.seconds:.0f} s{extra}")

    print("\nnot chosen (in both runs):")
    for node, why in NOT_CHOSEN.items():
        if node.split("::")[0].split(" ")[0] in results:
            print(f"  {node}: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=Path, required=True, help="the fetched files (README.md)")
    parser.add_argument("--only", nargs="+", choices=TEST_FILES, help="run these test files")
    parser.add_argument("--tests", nargs="+", help="of the chosen tests, only these (names)")
    parser.add_argument("--workdir", type=Path, help="build here instead of a new temp folder")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, xml)")
    parser.add_argument("--test-timeout", type=int, default=180, help="seconds per test phase")
    parser.add_argument("--file-timeout", type=int, default=1200, help="seconds per pytest run")
    args = parser.parse_args()

    test_files = args.only or TEST_FILES
    problems = check_sources(args.files, [*test_files, "util.py"])  # only what runs
    if problems:
        sys.exit("fetched files not as expected:\n  " + "\n  ".join(problems))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ray_data_tests_"))
    workdir.mkdir(parents=True, exist_ok=True)
    build_workdir(args.files, workdir, test_files)
    print(f"work folder: {workdir}")

    results = {}
    for test_file in test_files:
        runs = []
        for with_kit in (False, True):
            run = run_pytest(workdir, test_file, with_kit, args)
            label = "kit" if with_kit else "plain"
            print(f"  {test_file} {label}: {len(run.outcomes)} results in {run.seconds:.0f} s")
            runs.append(run)
        results[test_file] = (runs[0], runs[1])
    report(results)
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
