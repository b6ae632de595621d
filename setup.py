"""The one compiled part: the rules judge's scanners (judge_service/judges/rules/_scan.pyx).

Everything else is in pyproject.toml. The extension is optional: where no C compiler is
at hand the install still succeeds and the rules judge runs the scanners' Python
definitions, which give the same results (tests/test_rules_scan.py), more slowly.
"""

from pathlib import Path

from setuptools import Extension, setup

SOURCE = Path("judge_service/judges/rules/_scan.pyx")


def extensions() -> list[Extension]:
    if not SOURCE.exists():  # the Docker image's dependency layer installs a stub package
        return []
    from Cython.Build import cythonize

    extension = Extension(
        "judge_service.judges.rules._scan", [str(SOURCE)], optional=True, extra_compile_args=["-O2"]
    )
    return cythonize([extension], compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=extensions())
