"""docker-compose.yml is the topology README's "Running on several machines" documents, checked without Docker: its
five services; every assay command in it a command line assay's own parser takes; the workers on the pool the server
runs its plans on, with the same store and cache; the files at the same path in every assay container; and the same
flags as the README's commands."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml

from mcp_server.cli.commands import COMMANDS
from mcp_server.cli.parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
SERVICES = COMPOSE["services"]
ASSAY = {"assay": "serve", "worker1": "worker", "worker2": "worker"}  # service -> the assay command it runs
WORKERS = ("worker1", "worker2")
PER_MACHINE = {"--name"}  # flags one machine's command has that another's need not


def compose_words(service: str) -> list[str]:
    """The service's command as compose splits it (a string: like a shell)."""
    command = SERVICES[service]["command"]
    return shlex.split(command) if isinstance(command, str) else [str(word) for word in command]


def readme_commands() -> dict[str, list[str]]:
    """The `assay serve` and `assay worker` commands of the README's section, by command: the fenced shell lines
    with their continuations joined, comments and leading VAR=value assignments dropped."""
    section = re.search(r"^## Running on several machines\n(.*?)^## ", README, re.S | re.M)
    assert section, "README.md has no section 'Running on several machines'"
    found: dict[str, list[str]] = {}
    for block in re.findall(r"```bash\n(.*?)```", section.group(1), re.S):
        for line in re.sub(r"\\\n", " ", block).splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words = words[1:]
            if words[:1] == ["assay"] and len(words) > 1 and words[1] in ("serve", "worker"):
                assert words[1] not in found, f"README shows `assay {words[1]}` twice"
                found[words[1]] = words
    return found


def parsed(words: list[str], where: str) -> argparse.Namespace:
    """``words`` (``assay COMMAND ...``) through the parser `assay` itself builds for that command."""
    assert words[0] == "assay", f"{where}: {words}"
    command = words[1]
    if command not in COMMANDS:
        pytest.skip(f"`assay {command}` is not a command yet (mcp_server/cli/commands.py): {where} not checked")
    try:
        return build_parser(command).parse_args(words[1:])
    except SystemExit:
        pytest.fail(f"{where}: `{shlex.join(words)}` does not parse (see the usage above)")


def flags(words: list[str]) -> set[str]:
    return {w.split("=", 1)[0] for w in words if w.startswith("--")} - PER_MACHINE


def mounts(service: str) -> dict[str, str]:
    """Container path -> source (a host path or a named volume) of the service's volumes."""
    found = {}
    for volume in SERVICES[service].get("volumes", []):
        match = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(:r[ow])?", volume)  # ${VAR:-default} holds a colon
        assert match, f"{service}: volume {volume!r}"
        found[match.group(2)] = match.group(1)
    return found


def test_the_five_services_of_the_topology():
    assert set(SERVICES) == {"postgres", "prefect", "assay", *WORKERS}
    assert SERVICES["postgres"]["image"] == "postgres:16"
    assert "/var/lib/postgresql/data" in mounts("postgres")
    prefect = shlex.split(SERVICES["prefect"]["command"])
    assert prefect[:3] == ["prefect", "server", "start"] and prefect[prefect.index("--host") + 1] == "0.0.0.0"
    assert SERVICES["prefect"]["environment"]["PREFECT_SERVER_API_HOST"] == "0.0.0.0"
    assert all(SERVICES[s].get("build") == "." for s in ASSAY), "the assay containers run the image of ./Dockerfile"
    assert (ROOT / "Dockerfile").is_file()


@pytest.mark.parametrize("service", list(ASSAY))
def test_every_assay_command_line_parses_with_assays_own_parser(service):
    args = parsed(compose_words(service), f"docker-compose.yml's {service}")
    assert args.command == ASSAY[service]


@pytest.mark.parametrize("worker", WORKERS)
def test_the_workers_take_the_pool_serve_runs_on_with_the_same_store_cache_and_roots(worker):
    serve = parsed(compose_words("assay"), "docker-compose.yml's assay")
    work = parsed(compose_words(worker), f"docker-compose.yml's {worker}")
    assert work.pool == serve.work_pool
    assert work.database_url == serve.database_url and serve.database_url.startswith("postgresql+psycopg://")
    assert work.cache_dir == serve.cache_dir
    assert work.roots == serve.roots
    environment = SERVICES["assay"]["environment"]  # for the commands run beside the server (assay status, users)
    assert (environment["ASSAY_DATABASE_URL"], environment["ASSAY_WORK_POOL"]) == (serve.database_url,
                                                                                   serve.work_pool)


def test_the_files_and_the_cache_are_mounted_at_the_same_paths_in_every_assay_container():
    serve = parsed(compose_words("assay"), "docker-compose.yml's assay")
    (root,) = serve.roots
    for service in ASSAY:
        assert mounts(service).get(root) == mounts("assay")[root], f"{service}: the files are not at {root}"
        assert mounts(service).get(serve.cache_dir) == "cache", f"{service}: the cache is not at {serve.cache_dir}"
    assert "cache" in COMPOSE["volumes"]


@pytest.mark.parametrize("service", list(ASSAY))
def test_every_assay_container_reports_to_the_prefect_service(service):
    port = shlex.split(SERVICES["prefect"]["command"])
    assert SERVICES[service]["environment"]["PREFECT_API_URL"] == f"http://prefect:{port[port.index('--port') + 1]}/api"
    assert set(SERVICES[service]["depends_on"]) == {"postgres", "prefect"}


@pytest.mark.parametrize("service", list(ASSAY))
def test_the_compose_commands_are_the_readmes(service):
    command = ASSAY[service]
    documented = readme_commands()
    assert command in documented, f"README's section shows no `assay {command}`"
    readme, compose = documented[command], compose_words(service)
    assert flags(compose) == flags(readme), f"{service} and the README's `assay {command}` give different flags"
    ours, theirs = parsed(compose, f"docker-compose.yml's {service}"), parsed(readme, f"README's assay {command}")
    for option in ("work_pool", "pool", "cache_dir", "roots", "transport", "host", "auth"):
        assert getattr(ours, option, None) == getattr(theirs, option, None), option
    assert ours.database_url.split("://")[0] == theirs.database_url.split("://")[0]
