"""docs/settings.md's tables are the ones rendered from Settings' descriptions (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic.fields import FieldInfo

from judge_service import settings_doc
from judge_service.config import Settings
from judge_service.settings_doc import GROUPS, env_name, readme_block, render_tables

PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def test_readme_block_is_the_rendered_tables() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert text.count(settings_doc.BEGIN) == 1 and text.count(settings_doc.END) == 1
    assert readme_block(text) == render_tables().strip("\n"), (
        "docs/settings.md's settings tables are stale: run "
        "`.venv/bin/python -m judge_service.settings_doc`"
    )
    # One place documents the settings: the page's one block, and the README has none.
    assert text.startswith("# Settings")
    readme = (PAGE.parent.parent / "README.md").read_text(encoding="utf-8")
    assert settings_doc.BEGIN not in readme


def test_every_setting_has_one_row_with_a_description() -> None:
    tables = render_tables()
    rows = [line for line in tables.splitlines() if line.startswith("| `JUDGE_")]
    assert len(rows) == len(Settings.model_fields)
    for name, info in Settings.model_fields.items():
        assert info.description and info.description.strip(), name
        matching = [row for row in rows if row.startswith(f"| `{env_name(name)}` |")]
        assert len(matching) == 1, name
        assert " ".join(info.description.split()) in matching[0]


def test_every_setting_is_in_exactly_one_group() -> None:
    listed = [name for _, _, names in GROUPS for name in names]
    assert sorted(listed) == sorted(Settings.model_fields)
    assert len({key for key, _, _ in GROUPS}) == len(GROUPS)


def test_rendering_refuses_an_ungrouped_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_doc, "GROUPS", GROUPS[1:])
    with pytest.raises(ValueError, match="in no group"):
        render_tables()


@pytest.mark.parametrize(
    ("info", "shown"),
    [
        (FieldInfo(default=None), "unset"),
        (FieldInfo(default=True), "`true`"),
        (FieldInfo(default=120.0), "120"),
        (FieldInfo(default=0.25), "0.25"),
        (FieldInfo(default=131_072), "131072"),
        (FieldInfo(default="auto"), "`auto`"),
        (FieldInfo(default_factory=dict), "`{}`"),
        (FieldInfo(default=None, json_schema_extra={"default_doc": "SDK default"}), "SDK default"),
    ],
)
def test_defaults_read_as_an_operator_writes_them(info: FieldInfo, shown: str) -> None:
    assert settings_doc.default_text(info) == shown


def test_rewrite_replaces_only_the_block() -> None:
    text = f"before\n{settings_doc.BEGIN}\nold table\n{settings_doc.END}\nafter\n"
    rewritten = settings_doc.rewrite(text)
    assert rewritten.startswith(f"before\n{settings_doc.BEGIN}\n\n")
    assert rewritten.endswith(f"\n{settings_doc.END}\nafter\n")
    assert "old table" not in rewritten
    assert readme_block(rewritten) == render_tables().strip("\n")
    assert settings_doc.rewrite(rewritten) == rewritten
