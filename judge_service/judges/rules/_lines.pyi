# The compiled line scan's types (_lines.pyx); it equals claims.python_line_links.
from judge_service.judges.rules.links import Link

def line_links(text: str, base: int, stop: int) -> list[Link]: ...
