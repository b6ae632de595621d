"""The LLM judge's prompts, one directory per version (README.md here).

Installed as ``judge_service.prompts`` (pyproject.toml's ``package-dir`` maps it to this
top-level directory), so the prompts are package data found with ``importlib.resources``,
in a wheel and in an editable install alike. There is no code here.
"""
