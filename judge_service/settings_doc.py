"""The docs' settings tables (docs/settings.md), rendered from `Settings`' field descriptions.

The descriptions in `judge_service.config` are the one source; docs/settings.md holds the
rendered tables between the markers below, and tests/test_settings_doc.py fails when the two
drift. After changing a setting, rewrite the page's block with::

    .venv/bin/python -m judge_service.settings_doc
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic.fields import FieldInfo

from judge_service.config import GROUPS as SETTINGS_GROUPS
from judge_service.config import Settings

BEGIN = "<!-- settings:begin -->"
END = "<!-- settings:end -->"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"

# One table per concern, from the concern's class in judge_service.config: (key, heading,
# its fields in the order the class defines them). `Settings` is built from exactly these
# classes, so every field is in one group; rendering still refuses anything else.
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple(
    (key, heading, tuple(concern.model_fields)) for key, heading, concern in SETTINGS_GROUPS
)


def env_name(field: str) -> str:
    return f"JUDGE_{field.upper()}"


def default_text(info: FieldInfo) -> str:
    """The default as an operator would write it, or the field's ``default_doc``."""
    extra = info.json_schema_extra
    if isinstance(extra, dict) and "default_doc" in extra:
        return str(extra["default_doc"])
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return f"`{value}`"
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    # A bare pipe would end the cell; newlines would end the row.
    return " ".join(text.split()).replace("|", "\\|")


def _check_groups() -> None:
    listed = [name for _, _, names in GROUPS for name in names]
    fields = set(Settings.model_fields)
    twice = sorted({name for name in listed if listed.count(name) > 1})
    missing = sorted(fields - set(listed))
    unknown = sorted(set(listed) - fields)
    undescribed = sorted(n for n, f in Settings.model_fields.items() if not f.description)
    if twice or missing or unknown or undescribed:
        raise ValueError(
            f"settings_doc.GROUPS: listed twice {twice}, in no group {missing}, "
            f"not a setting {unknown}; without a description {undescribed}"
        )


def render_tables() -> str:
    """One markdown table per group: setting, default, meaning."""
    _check_groups()
    parts: list[str] = []
    for _, heading, names in GROUPS:
        rows = [f"#### {heading}", "", "| setting | default | meaning |", "|---|---|---|"]
        for name in names:
            info = Settings.model_fields[name]
            rows.append(
                f"| `{env_name(name)}` | {_cell(default_text(info))} "
                f"| {_cell(info.description or '')} |"
            )
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def readme_block(text: str) -> str:
    """What a page's text holds between the markers, without the blank lines around it."""
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END, start)].strip("\n")


def rewrite(text: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return f"{text[:start]}\n\n{render_tables()}\n{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    path = Path(argv[0]) if argv else PAGE
    text = path.read_text(encoding="utf-8")
    updated = rewrite(text)
    if updated != text:
        path.write_text(updated, encoding="utf-8")
        print(f"{path}: settings tables rewritten")
    else:
        print(f"{path}: settings tables already current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
