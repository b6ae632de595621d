"""judge-service: per-token credit for LLM reasoning rollouts.

What a trainer or an embedding application imports; everything here needs numpy
alone (a test imports it with transformers, torch, sympy, FastAPI and pydantic
blocked):

- the credit math (`judge_service.credit`): ``token_credit``, ``group_advantages``,
  ``advantage_in_group``, ``judge_share``, and the wire encodings ``encode`` /
  ``decode`` (``dense``, ``spans``, ``base64-f32``);
- the default label scores (`judge_service.labels`), and the accepted span
  (`judge_service.spans.Span`);
- every error the service raises on purpose (`judge_service.errors`, its
  docstring draws the tree).

The HTTP client for trainers is `judge_service.client` (``JudgeClient``,
``AsyncJudgeClient``); the server is `judge_service.api.app.create_app`, the
engine behind it `judge_service.pipeline.Engine`; the trainer integrations are
under `judge_service.integrations`. ARCHITECTURE.md maps the rest.
"""

from judge_service.credit import (
    Credit,
    GroupAdvantage,
    advantage_in_group,
    decode,
    encode,
    group_advantages,
    judge_share,
    token_credit,
)
from judge_service.errors import (
    AuthError,
    BudgetError,
    ConflictError,
    ContextLengthError,
    IdempotencyConflict,
    InputError,
    InputFileError,
    JudgeError,
    JudgeServiceError,
    LimitError,
    NotFoundError,
    ParseError,
    ProbeFileError,
    ProviderError,
    RateLimitedError,
    RecordsError,
    RedisUrlError,
    RemoteScorerError,
    SlotTimeoutError,
    StoreUnavailable,
    StreamCutError,
    TokenIdError,
    TokenizerError,
    TooLarge,
    TooManyRequests,
    UnavailableError,
    ValueJudgeError,
)
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import Span

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_LABEL_SCORES",
    "AuthError",
    "BudgetError",
    "ConflictError",
    "ContextLengthError",
    "Credit",
    "GroupAdvantage",
    "IdempotencyConflict",
    "InputError",
    "InputFileError",
    "JudgeError",
    "JudgeServiceError",
    "LimitError",
    "NotFoundError",
    "ParseError",
    "ProbeFileError",
    "ProviderError",
    "RateLimitedError",
    "RecordsError",
    "RedisUrlError",
    "RemoteScorerError",
    "SlotTimeoutError",
    "Span",
    "StoreUnavailable",
    "StreamCutError",
    "TokenIdError",
    "TokenizerError",
    "TooLarge",
    "TooManyRequests",
    "UnavailableError",
    "ValueJudgeError",
    "__version__",
    "advantage_in_group",
    "decode",
    "encode",
    "group_advantages",
    "judge_share",
    "token_credit",
]
