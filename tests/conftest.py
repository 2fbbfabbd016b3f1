import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PUBLIC = FIXTURES / "public"
SHARED_H200 = FIXTURES / "h200-shared"  # copied from shared/fixtures/h200-1gpu (recorded 2026-12-02)


@pytest.fixture
def make_bundle(tmp_path):
    """Build a bundle folder from {bundle file name: fixture path or literal text}."""
    counter = iter(range(1000))

    def build(files: dict) -> Path:
        folder = tmp_path / f"bundle{next(counter)}"
        folder.mkdir()
        for name, source in files.items():
            if isinstance(source, Path):
                shutil.copy(source, folder / name)
            else:
                (folder / name).write_text(source)
        return folder
    return build
