"""The compiled parts: the rules judge's scanners (judge_service/judges/rules/_*.pyx), the
byte-level decode's gather (judge_service/trace/_bytes.pyx), and
the prompts' package (judge_service.prompts, the top-level prompts/).

Everything else is in pyproject.toml. The extensions are optional: where no C compiler is
at hand the install still succeeds and the rules judge runs the scanners' Python
definitions, which give the same results (tests/test_rules_scan.py), more slowly.
"""

from pathlib import Path
from typing import Any

import setuptools
from setuptools import Extension, setup

# The rules judge's scanners, and the byte-level decode's gather (judge_service/trace).
SOURCES = sorted(
    [
        *Path("judge_service/judges/rules").glob("_*.pyx"),
        *Path("judge_service/trace").glob("_*.pyx"),
    ]
)
# pyproject.toml maps judge_service.prompts to prompts/ ([tool.setuptools.package-dir]);
# its packages.find only finds what is under judge_service/.
PROMPTS = "judge_service.prompts"


class Distribution(setuptools.Distribution):
    """pyproject.toml's packages plus judge_service.prompts (pyproject's list replaces
    one given to setup(), so it is added once the configuration is read)."""

    def parse_config_files(self, *args: Any, **kwargs: Any) -> None:
        super().parse_config_files(*args, **kwargs)
        # A source tree without prompts/ (a stub for installing dependencies) builds without.
        if Path("prompts/__init__.py").is_file() and PROMPTS not in (self.packages or []):
            self.packages = [*(self.packages or []), PROMPTS]


def extensions() -> list[Extension]:
    if not SOURCES:  # the Docker image's dependency layer installs a stub package
        return []
    from Cython.Build import cythonize

    built = [
        Extension(
            ".".join(source.with_suffix("").parts),
            [str(source)],
            optional=True,
            extra_compile_args=["-O2"],
        )
        for source in SOURCES
    ]
    return cythonize(built, compiler_directives={"language_level": "3"}, quiet=True)


setup(distclass=Distribution, ext_modules=extensions())
