"""Harbor's own reading of task.toml, for onebash's tests
(src/task/harbor/schema_tests.rs): `fields` prints every field path of
Harbor's TaskConfig (`[]` marks a list of tables) as a JSON list; `parse
FILE...` prints, for each file, one JSON line of what TaskConfig made of
it (the values onebash uses), or the error it raised."""

import json
import sys
import typing
import warnings

from pydantic import BaseModel

from harbor.models.task.config import TaskConfig


def models(annotation):
    """The pydantic models an annotation holds, and whether in a list."""
    found = []
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    for arg in typing.get_args(annotation):
        for model, listed in models(arg):
            found.append((model, listed or origin is list))
    return found


def fields(model, prefix, seen):
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path
        for inner, listed in models(info.annotation):
            if (inner, path) in seen:
                continue
            seen.add((inner, path))
            yield from fields(inner, f"{path}{'[]' if listed else ''}.", seen)


def parse(path):
    text = open(path, encoding="utf-8").read()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = TaskConfig.model_validate_toml(text)
    except Exception as err:  # pydantic's ValidationError, a TOML error
        return {"ok": False, "error": str(err).splitlines()[0]}
    env = config.environment
    # Each phase's policy as Harbor's trial resolves it
    # (harbor/trial/network_policy.py): its own when written, else the
    # environment's baseline.
    baseline = env.resolve_baseline()
    phases = {
        phase: getattr(config, phase).explicit_phase_policy() or baseline
        for phase in ("agent", "verifier")
    }
    return {
        "ok": True,
        "verifier_timeout_sec": config.verifier.timeout_sec,
        "agent_timeout_sec": config.agent.timeout_sec,
        "build_timeout_sec": env.build_timeout_sec,
        "cpus": env.cpus,
        "memory_mb": env.memory_mb,
        "docker_image": env.docker_image or None,
        "verifier_env": config.verifier.env,
        "network_mode": env.network_mode.value,
        "phase_networks": {
            phase: [policy.network_mode.value, policy.allowed_hosts]
            for phase, policy in phases.items()
        },
        "env": env.env,
        "workdir": env.workdir,
        "agent_user": config.agent.user,
        "verifier_user": config.verifier.user,
        "solution_env": config.solution.env,
        "healthcheck": env.healthcheck.model_dump() if env.healthcheck else None,
    }


if sys.argv[1] == "fields":
    print(json.dumps(sorted(set(fields(TaskConfig, "", set())))))
else:
    for path in sys.argv[2:]:
        print(json.dumps(parse(path)))
