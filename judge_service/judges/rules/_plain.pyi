# The compiled scanner's types (_plain.pyx); it equals plain_claims.python_plain_links.
from judge_service.judges.rules.links import Link

def plain_links(line: str) -> list[Link] | None: ...
