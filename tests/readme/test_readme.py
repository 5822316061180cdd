"""The README's two commands: the set-up + main job runs as written on a fresh venv; CI runs the test one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", ".ci-venv", "bench-results", "txlake-demo", "site", ".pytest_cache", ".mypy_cache"}


def _commands() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    setup = next(b.strip() for b in blocks if "txlake demo" in b)
    tests = next(b.strip() for b in blocks if "pytest" in b)
    return setup, tests


def test_ci_runs_the_readme_test_command() -> None:
    _, tests = _commands()
    assert tests == ".venv/bin/python -m pytest -q -n 2"
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.splitlines()[-1] == "python -m pytest -q -n 2"


def test_readme_setup_and_main_job_on_a_fresh_venv(tmp_path: Path) -> None:
    setup, _ = _commands()
    assert setup.startswith("python3 -m venv .venv")
    checkout = tmp_path / "txlake"
    shutil.copytree(ROOT, checkout, ignore=lambda d, names: [n for n in names if n in SKIP or n.endswith(".egg-info")])
    done = subprocess.run(["bash", "-c", setup], cwd=checkout, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "invariant held" in done.stdout
    assert (checkout / "txlake-demo" / "txlake-demo.png").exists()


def test_readme_python_example_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    example = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    assert "file:///tmp/lake" in example
    code = example.replace("file:///tmp/lake", f"file://{tmp_path}/lake")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    lake = namespace["lake"]
    assert lake.read_arrow("bank.savings", where="id = 1").to_pylist() == [{"id": 1, "balance": 30}]  # type: ignore[attr-defined]
    assert lake.read_arrow("bank.checking", where="id = 1").to_pylist() == [{"id": 1, "balance": 70}]  # type: ignore[attr-defined]
