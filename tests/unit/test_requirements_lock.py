"""requirements.lock (what `make install` installs) pins every dependency of pyproject.toml, its
extras included, at a version its bounds allow: a dependency changed without `make lock` fails here."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pin_chessboard_pipelines.settings import PROJECT_ROOT


def _locked() -> dict[str, str]:
    text = (PROJECT_ROOT / "requirements.lock").read_text(encoding="utf-8")
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", text, re.MULTILINE)
    }


def test_the_lock_pins_every_dependency_within_its_bounds():
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    locked = _locked()
    extras = project["optional-dependencies"]
    for line in [*project["dependencies"], *(line for extra in extras.values() for line in extra)]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name == canonicalize_name(project["name"]):
            assert requirement.extras <= set(extras), line  # dev includes demo
            continue
        assert name in locked, f"{requirement.name} is not in requirements.lock: run make lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock has {requirement.name}=={locked[name]}, pyproject.toml wants {line}: run make lock"
        )


def test_the_lock_pins_exact_versions_only():
    text = (PROJECT_ROOT / "requirements.lock").read_text(encoding="utf-8")
    requirements = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert requirements and all("==" in line for line in requirements)
    assert len(_locked()) == len(requirements)
