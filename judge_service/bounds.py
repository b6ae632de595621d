"""`judge_service.bounds`, kept for its callers: a re-export of
`judge_service_client.bounds`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.bounds import (
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_LABELS,
    MAX_METADATA_CHARS,
    MAX_METADATA_DEPTH,
    MAX_NAME_CHARS,
    MAX_SPANS_CEILING,
    MAX_TEXT_CHARS,
    Finite,
    Id,
    Label,
    Metadata,
    Name,
    ShortText,
    SpanLabel,
    Text,
    bounded_json,
    well_formed,
)

__all__ = [
    "MAX_ID_CHARS",
    "MAX_LABELS",
    "MAX_LABEL_CHARS",
    "MAX_METADATA_CHARS",
    "MAX_METADATA_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_SPANS_CEILING",
    "MAX_TEXT_CHARS",
    "Finite",
    "Id",
    "Label",
    "Metadata",
    "Name",
    "ShortText",
    "SpanLabel",
    "Text",
    "bounded_json",
    "well_formed",
]
