"""The compiled parts: the rules judge's scanners (judge_service/judges/rules/_*.pyx).

Everything else is in pyproject.toml. The extensions are optional: where no C compiler is
at hand the install still succeeds and the rules judge runs the scanners' Python
definitions, which give the same results (tests/test_rules_scan.py), more slowly.
"""

from pathlib import Path

from setuptools import Extension, setup

SOURCES = sorted(Path("judge_service/judges/rules").glob("_*.pyx"))


def extensions() -> list[Extension]:
    if not SOURCES:  # the Docker image's dependency layer installs a stub package
        return []
    from Cython.Build import cythonize

    built = [
        Extension(
            f"judge_service.judges.rules.{source.stem}",
            [str(source)],
            optional=True,
            extra_compile_args=["-O2"],
        )
        for source in SOURCES
    ]
    return cythonize(built, compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=extensions())
