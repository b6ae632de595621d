"""The judging half of docker/compose-check.sh, against a running compose project.

Submits jobs of the bundled examples (rules judge, cache off) through the API on the
host's published port, kills a worker container while it holds rollouts, and checks
that every rollout got exactly one result, in input order, the same result as every
other copy of the same example, none failed or dead-lettered. Also checks that the
sandbox's isolation holds in the API and in a worker, and which container options it
needs. Standard library only: it runs on the host with any Python 3.11.

    python docker/compose_check.py --url http://127.0.0.1:PORT --project NAME
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STREAM, GROUP = "judge:queue", "judges"  # JUDGE_REDIS_PREFIX's default, the group's name
TERMINAL = ("done", "failed", "cancelled")
# The container options tried for the sandbox probe (the image runs as uid 10001).
SANDBOX_OPTIONS = {
    "none": [],
    "--security-opt seccomp=unconfined": ["--security-opt", "seccomp=unconfined"],
    "--cap-add SYS_ADMIN": ["--cap-add", "SYS_ADMIN"],
    "--cap-add SYS_ADMIN --security-opt no-new-privileges:true": [
        "--cap-add", "SYS_ADMIN", "--security-opt", "no-new-privileges:true",
    ],
}  # fmt: skip


class CheckFailed(Exception):
    pass


def log(message: str) -> None:
    print(f"[compose-check {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(*args: str, check: bool = True) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise CheckFailed(f"{shlex.join(args)}: exit {done.returncode}: {said}")
    return done.stdout


def pause(container: str, attempts: int = 5) -> bool:
    """`docker pause`, tried a few times: runc gives up ("unable to freeze") when the
    cgroup freezer does not settle in time, e.g. while a process of the container forks
    (a healthcheck's exec) on a loaded host."""
    for _ in range(attempts):
        try:
            run("docker", "pause", container)
            return True
        except CheckFailed as exc:
            log(f"{exc}; again")
            time.sleep(0.2)
    return False


class Api:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:2000].decode(errors="replace")
            raise CheckFailed(f"{method} {path}: HTTP {exc.code}: {detail}") from exc

    def readyz(self) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=5) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        except (urllib.error.URLError, OSError, ValueError):
            return 0, {}


class Project:
    def __init__(self, name: str, api: Api) -> None:
        self.name = name
        self.api = api
        self._redis: str | None = None

    def containers(self, service: str) -> list[str]:
        """The running containers of a service (docker ps: fast, unlike Compose v1)."""
        labels = {"project": self.name, "service": service}
        filters = [
            arg
            for key, value in labels.items()
            for arg in ("--filter", f"label=com.docker.compose.{key}={value}")
        ]
        return run("docker", "ps", "-q", "--no-trunc", *filters).split()

    def redis(self, *command: str) -> list[str]:
        if self._redis is None:
            (self._redis,) = self.containers("redis")
        container = self._redis
        return run("docker", "exec", container, "redis-cli", "--raw", *command).splitlines()

    def pending_by_consumer(self) -> dict[str, int]:
        lines = self.redis("XINFO", "CONSUMERS", STREAM, GROUP)
        pending: dict[str, int] = {}
        name = None
        for key, value in itertools.pairwise(lines):
            if key == "name":
                name = value
            elif key == "pending" and name is not None:
                pending[name] = int(value)
                name = None
        return pending

    def worker_of(self, consumer: str) -> str | None:
        """The container whose worker is `consumer` (`<hostname>-<pid>`, hostname = the
        container id's first 12 characters)."""
        for container in self.containers("worker"):
            if consumer.startswith(container[:12] + "-"):
                return container
        return None


def wait_ready(api: Api, workers: int, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status, body = api.readyz()
        checks = body.get("checks", {})
        separate = checks.get("workers", {}).get("separate")
        sandbox_known = checks.get("sandbox", {}).get("error") != "timed out"
        if status == 200 and separate == workers and sandbox_known:
            return body
        time.sleep(1)
    raise CheckFailed(f"not ready with {workers} workers in {timeout_s:.0f} s: {body}")


def examples() -> list[dict[str, Any]]:
    lines = (ROOT / "examples" / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def rollouts(n: int) -> list[dict[str, Any]]:
    bundled = examples()
    out = []
    whole = -(-n // len(bundled)) * len(bundled)  # whole groups only: equal advantages
    for i in range(whole):
        rollout = dict(bundled[i % len(bundled)])
        cycle = i // len(bundled)  # one copy of every group per cycle: same advantages
        rollout["id"] = f"{i:06d}-{rollout['id']}"
        rollout["group_id"] = f"{rollout['group_id']}-{cycle}"
        out.append(rollout)
    return out


def results(api: Api, job: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = api.call("GET", f"/v1/jobs/{job}/results{query}")
        got.extend(page["results"])
        cursor = page["next_cursor"]
        if cursor is None:
            return got
        if not page["results"]:
            raise CheckFailed(f"job {job} is done but its results stop at {len(got)}")


def verify(api: Api, job: str, sent: list[dict[str, Any]], examples: int) -> dict[str, Any]:
    view = api.call("GET", f"/v1/jobs/{job}")
    counts = view["counts"]
    got = results(api, job)
    ids = [r["id"] for r in got]
    want = [r["id"] for r in sent]
    problems = []
    if view["status"] != "done":
        problems.append(f"status {view['status']}")
    if counts["done"] != len(sent) or counts["failed"] or counts["dead_lettered"]:
        problems.append(f"counts {counts}")
    if len(got) != len(sent):
        problems.append(f"{len(got)} results for {len(sent)} rollouts")
    duplicates = [i for i, c in Counter(ids).items() if c > 1]
    if duplicates:
        problems.append(f"{len(duplicates)} rollouts with more than one result: {duplicates[:5]}")
    missing = sorted(set(want) - set(ids))
    if missing:
        problems.append(f"{len(missing)} rollouts without a result: {missing[:5]}")
    if not duplicates and not missing and ids != want:
        problems.append("results out of input order")
    statuses = Counter(r["status"] for r in got)
    if set(statuses) - {"ok"}:
        problems.append(f"statuses {dict(statuses)}")
    # Every copy of an example (rules judge, deterministic) must have the same result,
    # whichever worker judged it and however often it was delivered.
    signature: dict[int, str] = {}
    for i, result in enumerate(got):
        fields = {k: result.get(k) for k in ("status", "num_tokens", "spans", "credit")}
        fields["advantage"] = result.get("advantage")
        text = json.dumps(fields, sort_keys=True)
        if signature.setdefault(i % examples, text) != text:
            problems.append(f"result {result['id']} differs from the other copies of its example")
            break
    if problems:
        raise CheckFailed(f"job {job}: " + "; ".join(problems))
    return {"results": len(got), "statuses": dict(statuses), "counts": counts}


def judge_through_a_kill(project: Project, n: int, how: str, timeout_s: float) -> dict[str, Any]:
    """One job of n rollouts; a worker holding rollouts is killed once about a tenth of
    them are judged: `docker kill -s KILL` (the container stays down), or SIGKILL of its
    process from the host ("crash": Docker's restart policy starts it again, with the
    same hostname and pid, so the same consumer name)."""
    api = project.api
    sent = rollouts(n)
    options = {"judge": "rules", "use_cache": False}
    started = time.monotonic()
    job = api.call("POST", "/v1/jobs", {"rollouts": sent, "options": options}, timeout=120)["id"]
    log(f"{how}: job {job}, {len(sent)} rollouts")
    victim: str | None = None
    consumer, orphaned, unfrozen = "", 0, 0
    while victim is None:
        view = api.call("GET", f"/v1/jobs/{job}")
        if view["status"] in TERMINAL:
            raise CheckFailed(
                f"job {job} ended ({view['status']}) before a worker could be killed mid-job: "
                + (f"{unfrozen} pauses failed; " if unfrozen else "")
                + "raise COMPOSE_CHECK_ROLLOUTS"
            )
        if view["counts"]["done"] < len(sent) // 10:
            time.sleep(0.05)
            continue
        pending = project.pending_by_consumer()
        for name, count in sorted(pending.items(), key=lambda item: -item[1]):
            container = project.worker_of(name)
            if count == 0 or container is None:
                continue
            # Frozen (cgroup freezer), the worker acknowledges nothing: what it holds now is
            # exactly what the kill orphans. A frozen process dies of SIGKILL on thawing.
            if not pause(container):
                unfrozen += 1
                continue  # another worker, or this one again in the next round
            held = project.pending_by_consumer().get(name, 0)
            if held == 0:
                run("docker", "unpause", container)
                continue
            if how == "docker kill":
                run("docker", "kill", "-s", "KILL", container)
            else:
                pid = run("docker", "inspect", "-f", "{{.State.Pid}}", container).strip()
                run("kill", "-KILL", pid)
                run("docker", "unpause", container)
            victim, consumer, orphaned = container, name, held
            break
    killed_at = time.monotonic()
    done_at_kill = api.call("GET", f"/v1/jobs/{job}")["counts"]["done"]
    log(
        f"{how}: killed {victim[:12]} (consumer {consumer}) holding {orphaned} rollouts, "
        f"{done_at_kill}/{len(sent)} judged"
    )
    taken_over_s = None
    deadline = killed_at + timeout_s
    while True:
        now = time.monotonic()
        if taken_over_s is None and project.pending_by_consumer().get(consumer, 0) == 0:
            taken_over_s = now - killed_at
        view = api.call("GET", f"/v1/jobs/{job}")
        if view["status"] in TERMINAL and taken_over_s is not None:
            break
        if now > deadline:
            pending = project.pending_by_consumer()
            hint = ""
            if how == "crash" and consumer in pending:
                hint = (
                    ". The restarted container's worker is alive under the dead one's consumer "
                    "name (hostname-pid: the same hostname, pid 1), so no worker takes the "
                    "dead one's rollouts and the new one never reads them: a worker's name must "
                    "differ at each start (or a worker must first take its own name's pending)"
                )
            raise CheckFailed(
                f"{how}: job {job} not done {timeout_s:.0f} s after the kill: {view['counts']}; "
                f"consumer {consumer} still holds {pending.get(consumer, 0)} rollouts{hint}"
            )
        time.sleep(0.25)
    finished_s = time.monotonic() - started
    summary = verify(api, job, sent, len(examples()))
    state = json.loads(run("docker", "inspect", "-f", "{{json .State}}", victim))
    restarts = run("docker", "inspect", "-f", "{{.RestartCount}}", victim).strip()
    summary.update(
        kill=how,
        orphaned_at_kill=orphaned,
        judged_at_kill=done_at_kill,
        taken_over_s=round(taken_over_s or 0.0, 1),
        job_s=round(finished_s, 1),
        victim_after={"status": state["Status"], "restarts": int(restarts)},
    )
    log(f"{how}: {json.dumps(summary)}")
    return summary


def sandbox(project: Project, ready: dict[str, Any], image: str) -> dict[str, Any]:
    api_status = ready["checks"]["sandbox"]
    (worker, *_) = project.containers("worker")
    probe = ["python", "-m", "sandbox.zygote", "--probe"]
    in_worker = json.loads(run("docker", "exec", worker, *probe))
    bare: dict[str, Any] = {}
    for label, options in SANDBOX_OPTIONS.items():
        report = json.loads(run("docker", "run", "--rm", *options, image, *probe))
        bare[label] = report.get("isolated", False) or report.get("reason")
    out = {"api": api_status, "worker": in_worker, "plain docker run": bare}
    log(f"sandbox: {json.dumps(out)}")
    for where, report in (("api", api_status), ("worker", in_worker)):
        if not report.get("isolated"):
            raise CheckFailed(f"the sandbox's isolation does not hold in the {where}: {report}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--project", required=True, help="the compose project's name")
    parser.add_argument("--image", default="judge-service:local")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=120.0, help="s after a kill")
    parser.add_argument("--crash", action="store_true", help="also a crash with a restart")
    parser.add_argument("--summary", type=Path, help="write the findings here as JSON")
    args = parser.parse_args(argv)
    api = Api(args.url)
    project = Project(args.project, api)
    findings: dict[str, Any] = {}
    try:
        ready = wait_ready(api, args.workers, 180)
        log(f"ready: {json.dumps(ready['checks']['workers'])}")
        findings["sandbox"] = sandbox(project, ready, args.image)
        findings["docker kill"] = judge_through_a_kill(
            project, args.rollouts, "docker kill", args.timeout
        )
        if args.crash:
            findings["crash"] = judge_through_a_kill(project, args.rollouts, "crash", args.timeout)
    except CheckFailed as exc:
        log(f"FAILED: {exc}")
        findings["failed"] = str(exc)
        return 1
    finally:
        if args.summary:
            args.summary.write_text(json.dumps(findings, indent=2) + "\n", encoding="utf-8")
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
