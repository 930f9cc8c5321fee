import os
import subprocess

import pytest

from tests.unit.conftest import ProcessForbidden


def test_subprocess_is_refused() -> None:
    with pytest.raises(ProcessForbidden):
        subprocess.run(["true"], check=False)


def test_os_system_is_refused() -> None:
    with pytest.raises(ProcessForbidden):
        os.system("true")
