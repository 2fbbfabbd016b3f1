"""`gpuready burn`: every GPU at full load with silent-error detection (run.py), judged in judge.py."""

from gpuready.verbs.burn.run import DTYPES, BurnOptions, parse_duration, run_burn

__all__ = ["DTYPES", "BurnOptions", "parse_duration", "run_burn"]
