"""Token ids to text: the decoded trace, its per-token char ranges, and the judge's marked view."""

from judge_service.trace.boxed import BoxedAnswer, last_boxed
from judge_service.trace.decode import Trace
from judge_service.trace.markers import MarkedView, escape_view_text, mark, strip_markers
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache

__all__ = [
    "BoxedAnswer",
    "LoadedTokenizer",
    "MarkedView",
    "TokenizerCache",
    "Trace",
    "escape_view_text",
    "last_boxed",
    "mark",
    "strip_markers",
]
