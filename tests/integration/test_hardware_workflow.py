"""hardware.yml passes actionlint (with the same runner as the adoption test's), beside GitHub's
schema and zizmor in test_workflows.py: its steps are toolkit commands, not programs."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ROOT
from .test_adoption import actionlint

pytestmark = pytest.mark.integration


def test_hardware_yml_passes_actionlint(tmp_path: Path) -> None:
    actionlint([ROOT / ".github" / "workflows" / "hardware.yml"], tmp_path)
