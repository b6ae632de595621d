"""A group's cached judgments, served only as one set from one session.

The group's LLM session judges every shown rollout at once (`group.reading`), and the
pipeline caches each member's judgment under the member's own key, one save at a time. A
process stopped part way (or paused past its job lease while another worker took its
group over), or two judgings of one group racing, can leave a partial or mixed set: some
members from one session, some from another, some missing. Served member by member, a
retried ``/v1/judge/group`` or a job's group judged again would then carry the judgments of
two sessions in one group: readings that never saw each other's spans, contrasts and
hints, committed as if from one judging.

So every judgment a group session makes carries the session's id (`Judgment.session`),
and a group's cache is read here once, as a set, before any member is judged: served
only when every shown member's judgment is there and all carry one session's id (and a
transcript where the request asks for one); otherwise no cached member is served, the
whole group is judged afresh in one session, and its judgments replace the stored ones.
Two judgings racing each serve their own session's judgments; what they leave in the
cache may be mixed, and the next reading of it judges the group again rather than mix.
A rollout judged alone or by the rules judge is not a session's and is cached as before.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence

from judge_service.group.reading import GroupReader
from judge_service.judgment import Judgment
from judge_service.pipeline import Engine
from judge_service.resolve import Resolved
from judge_service.schemas import Rollout
from judge_service.store.cache import CacheState, Looked


async def one_session(
    engine: Engine,
    reader: GroupReader,
    rollouts: Sequence[Rollout],
    resolved: Resolved,
    sources: Mapping[int, int],
) -> dict[int, Looked]:
    """Each shown rollout's cache read (`Looked`), the group's as one set. Empty when the
    cache is not read at all (none, or bypassed): each rollout then reports it as usual."""
    cache = engine.cache
    if cache is None or not resolved.use_cache:
        return {}
    shown = list(reader.shown)
    keys = [
        engine.key_of(rollouts[i], reader.member(i, sources), resolved, reader.shown[i].trace)
        for i in shown
    ]
    found = await asyncio.gather(*(cache.lookup(engine.tenant, key) for key in keys))
    judgments = [judgment for judgment, _ in found]
    if complete(judgments, resolved.include_transcript):
        return {i: Looked(j, "hit") for i, j in zip(shown, judgments, strict=True)}
    session = uuid.uuid4().hex
    state: CacheState = "unavailable" if any(s == "unavailable" for _, s in found) else "miss"
    return {i: Looked(None, state, session) for i in shown}


def complete(judgments: Sequence[Judgment | None], transcripts: bool) -> bool:
    """Whether the cached judgments are a whole set from one group session."""
    sessions = {j.session if j is not None else None for j in judgments}
    if len(sessions) != 1 or None in sessions:
        return False
    return not transcripts or all(j is not None and j.transcript is not None for j in judgments)
