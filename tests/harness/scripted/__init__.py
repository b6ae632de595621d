"""Scripted LLM provider servers on loopback, speaking the real wire formats.

The tests and the bench point the real `anthropic` and `openai` SDK clients at
these servers by base URL. A script, chosen by a ``SCRIPT:<name>`` tag in the
rollout's problem text, plays the judge: one step per model turn, each a tool
call reply, text, an HTTP fault or a hang; a step may be a function of what
the judge was sent (its last tool results), so the scripted judge can read
tool output before it submits.
"""

from tests.harness.scripted.script import (
    Call,
    Fault,
    Hang,
    Reply,
    Script,
    ScriptBook,
    View,
    call,
    submit,
)
from tests.harness.scripted.server import (
    FakeProviderServer,
    anthropic_server,
    openai_server,
)

__all__ = [
    "Call",
    "FakeProviderServer",
    "Fault",
    "Hang",
    "Reply",
    "Script",
    "ScriptBook",
    "View",
    "anthropic_server",
    "call",
    "openai_server",
    "submit",
]
