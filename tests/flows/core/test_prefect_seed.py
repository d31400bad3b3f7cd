"""A fresh Prefect home starts from the seed's database (ASSAY_PREFECT_SEED); a home with a database, or a database
elsewhere, is left alone."""

from __future__ import annotations

from pathlib import Path

from flows.core.prefect import seed_home


def a_seed(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "prefect.db").write_bytes(b"migrated")
    (seed / "memo_store.toml").write_text("memo\n")
    return seed


def test_a_home_without_a_database_gets_copies_of_the_seeds_files(tmp_path):
    seed, home = a_seed(tmp_path), tmp_path / "home"
    seed_home(home, {"ASSAY_PREFECT_SEED": str(seed)})
    assert (home / "prefect.db").read_bytes() == b"migrated" and (home / "memo_store.toml").read_text() == "memo\n"
    assert sorted(p.name for p in home.iterdir()) == ["memo_store.toml", "prefect.db"]  # no partial copies left


def test_the_home_comes_from_prefect_home_when_not_given(tmp_path):
    seed, home = a_seed(tmp_path), tmp_path / "from-env"
    seed_home(None, {"ASSAY_PREFECT_SEED": str(seed), "PREFECT_HOME": str(home)})
    assert (home / "prefect.db").read_bytes() == b"migrated"


def test_a_home_with_a_database_or_a_database_elsewhere_or_no_seed_is_left_alone(tmp_path):
    seed, home = a_seed(tmp_path), tmp_path / "home"
    home.mkdir()
    (home / "prefect.db").write_bytes(b"mine")
    seed_home(home, {"ASSAY_PREFECT_SEED": str(seed)})
    assert (home / "prefect.db").read_bytes() == b"mine" and not (home / "memo_store.toml").exists()
    for env in ({"ASSAY_PREFECT_SEED": str(seed), "PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://x/y"},
                {"ASSAY_PREFECT_SEED": str(seed), "PREFECT_SERVER_DATABASE_CONNECTION_URL": "sqlite+aiosqlite:///x"},
                {}):
        other = tmp_path / f"other-{len(env)}-{sorted(env)[-1] if env else 'none'}"
        seed_home(other, env)
        assert not other.exists()
