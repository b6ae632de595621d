"""Where a wrong solution goes wrong, read against correct ones: claim-level alignment.

Correct solutions of the same problem (a group's correct siblings, a dataset's reference
solution) say which quantities the problem's route computes. They are compared with the
wrong solution by *what* its steps compute, not by how they are written: a step is its
claims (operands, result, in exact values) and the values it writes
(`alignment.steps`), so wording, order, line breaks, markdown and number format do not
matter.

The point is found by walking back from the wrong final answer along what it was
computed from:

- a value is **good** when a correct solution computes or writes it, or, when nothing
  computes it here, when the problem gives it; a value this solution *computes* that no
  correct solution reaches is not made good by the problem happening to state the same
  number (``12 + 6 = 18`` when 18 is a given but no correct route computes 18);
- the final answer is never good (the verdict says it is wrong);
- a bad value's producer is the last claim before it that computes it, else the step
  that first writes it; its operands are walked in turn;
- a claim the answer does not descend from is a wrong turn too when it computes, from
  good inputs, a value no correct solution reaches and no later claim brings that value
  back onto the correct route (a dead end: "12 + 5 + 3 = 20" never used again);
- the point is the earliest producer reached whose own inputs are all good: the first
  step that computes, from inputs the correct route shares, a quantity no correct
  solution has (a wrong quantity, operation or reading), or that introduces a value
  from nowhere; a claim the checker proves false is bad whatever its value, and when the
  walk meets one, the earliest such is the point: a proven error outranks a value the
  correct solutions merely do not confirm (a correct sibling by another route confirms
  few of this one's values).

So a step a correct solution also makes is never the point (its result is good), nor is
a true step of another route that leads back onto the correct one (``16 - 3 = 13``
before ``13 - 4 = 9``, when 9 is the correct route's), and a correct solution by
another route adds its values to what is good instead of making a false point.
Values are matched exactly (``50%`` is 50, as written: reading it as 0.5 too made 100
match every 1). Values 0 and 1 carry no route.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from judge_service.alignment.steps import Claim, Step, read_steps, values_of
from judge_service.reading.numbers import number_value, read_numbers
from judge_service.trace.boxed import last_boxed

__all__ = ["Known", "Point", "final_value", "first_wrong_step"]

_TRIVIAL = frozenset({Fraction(0), Fraction(1)})
_MAX_WALK = 256  # producers visited: a trace's walk is bounded whatever its length
_MAX_LOOKS = 20_000  # claims looked at while deciding what is vindicated, per rollout


@dataclass(frozen=True)
class Point:
    step: int  # index among the wrong solution's steps
    start: int  # chars of the wrong text, the step's
    end: int
    value: Fraction  # the first wrong quantity
    reason: str  # "computed" (a claim) or "introduced" (a value written from nowhere)


def final_value(text: str, final_answer: str | None = None, problem: str = "") -> Fraction | None:
    """The value of a solution's final answer: its stated `final_answer`, else its last
    ``\\boxed{}``, else the last result of its last step (a claim's, else the last number
    the problem does not give: "34 hours in 4 weeks" is 34); an answer with a unit or a
    sign (``43 minutes``, ``\\$288.00``, ``70\\%``) by its last number."""
    boxed = last_boxed(text)
    for answer in (final_answer, boxed.content if boxed else None):
        if answer and answer.strip():
            value = number_value(answer)
            numbers = read_numbers(answer)
            if value is not None or numbers:
                return value if value is not None else numbers[-1].value
    steps = read_steps(text)
    if not steps or not steps[-1].values:
        return None
    last = steps[-1]
    results = [c.result for c in last.claims if c.result is not None]
    if results:
        return results[-1]
    given = {v for v, _ in values_of(problem)}
    new = [v for v, _ in last.values if v not in given]
    return (new or [v for v, _ in last.values])[-1]


@dataclass(frozen=True)
class Known:
    """What the correct solutions of a problem compute and write, read once per group."""

    computed: frozenset[Fraction]
    given: frozenset[Fraction]

    @classmethod
    def read(cls, correct: Sequence[str], problem: str = "") -> Known:
        given = {v for v, _ in values_of(problem)}
        computed: set[Fraction] = set()
        for text in correct:
            for step in read_steps(text):
                computed.update(step.computes())
                computed.update(v for v, _ in step.values if v not in given)
        return cls(frozenset(computed), frozenset(given))


def first_wrong_step(
    wrong: str,
    final: Fraction,
    correct: Sequence[str] | Known,
    problem: str = "",
    *,
    answer_at: int | None = None,
) -> Point | None:
    """The first wrong step of `wrong`, whose final answer `final` is wrong, read against
    the `correct` solutions of `problem` (or what `Known.read` read of them once; see the
    module docstring); None when the walk finds none (no correct solution, the answer
    written nowhere before `answer_at`)."""
    known = correct if isinstance(correct, Known) else Known.read(correct, problem)
    if not isinstance(correct, Known) and not correct:
        return None
    steps = read_steps(wrong)
    limit = len(wrong) if answer_at is None else answer_at
    computed = set(known.computed)
    return _Walk(steps, computed, computed | known.given, final, limit).run()


class _Walk:
    def __init__(
        self,
        steps: list[Step],
        computed: set[Fraction],
        given: set[Fraction],
        final: Fraction,
        limit: int,
    ) -> None:
        self.steps, self.computed, self.given = steps, computed, given
        self.final, self.limit = final, limit
        self.visited: set[tuple[int, Fraction]] = set()
        self.roots: list[Point] = []
        self.false: list[Point] = []
        self.vindicated: dict[tuple[Fraction, int], bool] = {}
        self.looks = 0
        # Producers by value, built once: a walk asks for them hundreds of times, and a
        # long trace has thousands of steps (a scan each time would be quadratic).
        self.claimed: dict[Fraction, list[tuple[int, Claim]]] = {}
        self.written: dict[Fraction, int] = {}
        for k, step in enumerate(steps):
            if step.start >= limit:
                continue
            for claim in step.claims:
                if claim.result is not None:
                    self.claimed.setdefault(claim.result, []).append((k, claim))
            for value, _ in step.values:
                self.written.setdefault(value, k)

    def run(self) -> Point | None:
        producer = self._producer(self.final, len(self.steps))
        if producer is None:
            return None
        self._walk(self.final, *producer)
        if self.false:  # a proven error outranks a value the correct route only lacks
            return min(self.false, key=lambda p: p.step)
        self.roots += self._dead_ends(producer[0])
        return min(self.roots, key=lambda p: p.step, default=None)

    def _dead_ends(self, last: int) -> list[Point]:
        """Claims before step `last` that compute, from good inputs, a value no correct
        solution reaches and that nothing after them brings back onto the correct route
        (no later claim uses it to reach a good value): wrong turns the answer does not
        descend from, but wrong all the same."""
        found: list[Point] = []
        for k, step in enumerate(self.steps[:last]):
            for claim in step.claims:
                value = claim.result
                if value is None or not self._bad(value, claim) or value == self.final:
                    continue
                if not all(self._good_input(o, k) for o in claim.operands):
                    continue
                if self._vindicated(value, k, 0):
                    continue
                found.append(Point(k, step.start, step.end, value, "computed"))
        return found

    def _good_input(self, operand: Fraction, step: int) -> bool:
        producer = self._producer(operand, step)
        return producer is None or not self._bad(operand, producer[1])

    def _vindicated(self, value: Fraction, step: int, depth: int) -> bool:
        """Whether a later claim uses `value` and reaches a good value (or one that is).
        Too deep or too long to tell: vindicated (no point is made on a doubt)."""
        key = (value, step)
        known = self.vindicated.get(key)
        if known is not None:
            return known
        if depth > 8 or self.looks > _MAX_LOOKS:
            return True
        self.vindicated[key] = True  # a cycle back here decides nothing against it
        answer = False
        for k in range(step + 1, len(self.steps)):
            for claim in self.steps[k].claims:
                self.looks += 1
                if value not in claim.operands or claim.result is None:
                    continue
                good = not self._bad(claim.result, claim) and claim.result != self.final
                if good or self._vindicated(claim.result, k, depth + 1):
                    answer = True
                    break
            if answer:
                break
        self.vindicated[key] = answer
        return answer

    def _producer(self, value: Fraction, before: int) -> tuple[int, Claim | None] | None:
        """The step (and claim) that produced `value` before step `before`: the last claim
        computing it, else the first step writing it."""
        claims = self.claimed.get(value)
        if claims:
            at = bisect.bisect_left(claims, before, key=lambda item: item[0])
            if at:
                return claims[at - 1]
        first = self.written.get(value)
        return None if first is None or first >= before else (first, None)

    def _bad(self, value: Fraction, claim: Claim | None) -> bool:
        if value == self.final:
            return True
        if claim is not None and not claim.holds:
            return True
        if value in _TRIVIAL:
            return False
        return value not in (self.computed if claim is not None else self.given)

    def _inputs(self, value: Fraction, step: int, claim: Claim | None) -> tuple[Fraction, ...]:
        """What `value` was computed from: its claim's operands; for a value written with
        no claim the checker reads ("26 + 16, which gives P = 42"), the values its step
        writes before it."""
        if claim is not None:
            return claim.operands
        values = self.steps[step].values
        first = next((at for v, at in values if v == value), None)
        return tuple(v for v, at in values if first is not None and at < first and v != value)

    def _reasoned_from(self, step: int) -> int:
        """A value written from nothing in its own step was reasoned out in the steps just
        before it that write no number ("Read it as a sum instead." before "41"): the
        first of them, else the step itself."""
        while step > 0 and not self.steps[step - 1].values and not self.steps[step - 1].claims:
            step -= 1
        return step

    def _walk(self, value: Fraction, step: int, claim: Claim | None) -> None:
        if (step, value) in self.visited or len(self.visited) >= _MAX_WALK:
            return
        self.visited.add((step, value))
        if claim is not None and not claim.holds:
            at = self.steps[step]
            self.false.append(Point(step, at.start, at.end, value, "computed"))
        inputs_good = True
        for operand in self._inputs(value, step, claim):
            producer = self._producer(operand, step)
            if producer is None:
                continue  # written here first: given, or this step introduces it
            k, source = producer
            if self._bad(operand, source) and operand != value:
                inputs_good = False
                self._walk(operand, k, source)
        if inputs_good:
            if claim is None and not self._inputs(value, step, claim):
                step = self._reasoned_from(step)
            at = self.steps[step]
            reason = "computed" if claim is not None else "introduced"
            self.roots.append(Point(step, at.start, at.end, value, reason))
