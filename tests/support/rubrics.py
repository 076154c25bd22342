"""The small rubric the rubric tests share: tests/rubric/small_rubric.toml, used as is or varied by substitution."""
from pathlib import Path

SMALL_RUBRIC_PATH = Path(__file__).resolve().parents[1] / "rubric" / "small_rubric.toml"
SMALL_RUBRIC = SMALL_RUBRIC_PATH.read_text()
