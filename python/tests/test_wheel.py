"""The package as a stranger installs it: the wheel built (hatchling), installed into a fresh virtual
environment with the official SDK, and the README's own example server run from it over stdio, charging a
real stipend serve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import META_AGENT, REPO, Stipend, session

pytestmark = pytest.mark.anyio

PYTHON_DIR = REPO / "python"


def readme_example() -> str:
    m = re.search(r"```python\n(.*?)```", (PYTHON_DIR / "README.md").read_text(), re.S)
    assert m, "the README has no ```python example"
    return m.group(1)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the built wheel and mcp installed (versions constrained to the test pins)."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(PYTHON_DIR)],
                   check=True, capture_output=True)
    wheels = list(dist.glob("stipend_mcp-*.whl"))
    assert len(wheels) == 1, wheels
    names = zipfile.ZipFile(wheels[0]).namelist()
    for want in ("stipend_mcp/__init__.py", "stipend_mcp/py.typed", "stipend_mcp/gate.py", "stipend_mcp/wallet.html"):
        assert want in names, f"the wheel lacks {want}: {names}"
    assert any(n.endswith("licenses/LICENSE") for n in names), f"the wheel carries no licence: {names}"
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "-c", str(PYTHON_DIR / "requirements-test.txt"), f"{wheels[0]}[mcp]"]
    if os.environ.get("STIPEND_WHEELHOUSE"):  # scripts/test-python's: the pinned packages, already downloaded
        pip[4:4] = ["--no-index", "--find-links", os.environ["STIPEND_WHEELHOUSE"]]
    done = subprocess.run(pip, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (tmp / "server.py").write_text(readme_example())
    return venv


async def test_readme_example_from_the_wheel(fresh_venv: Path, stipend: Stipend) -> None:
    agent = "wheel-agent"
    ent = stipend.fund(agent, 20)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
           "STIPEND_URL": stipend.url, "STIPEND_HOST_KEY": stipend.keys["host"]}
    command = [str(fresh_venv / "bin" / "python"), str(fresh_venv.parent / "server.py")]
    async with session("stdio", command, env) as s:
        prices = {t.name: (t.meta or {}).get("io.stipend/price") for t in (await s.list_tools()).tools}
        assert prices["forecast"] == {"cost": {"cents": 5, "currency": "USD"}, "units": 1, "policy": "on_success"}
        paid = await s.call_tool("forecast", {"city": "Oslo"}, meta={META_AGENT: agent})
        assert not paid.is_error, paid
        assert (paid.meta or {})["io.stipend/consumption"]["result"] == "consumed"
        assert stipend.credits(ent) == (15, 0)
        anonymous = await s.call_tool("forecast", {"city": "Oslo"})
        assert anonymous.is_error and (anonymous.meta or {})["io.stipend/refusal"]["error"] == "agent_unknown"
        broke = await s.call_tool("forecast", {"city": "Oslo"}, meta={META_AGENT: "wheel-broke"})
        assert (broke.meta or {})["io.stipend/refusal"]["error"] == "payment_required"
        assert "https://example.com/buy" in broke.content[0].text  # type: ignore[union-attr]
