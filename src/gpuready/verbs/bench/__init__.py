"""`gpuready bench`: the training benchmark on one GPU and on all of them (run.py), judged in judge.py."""

from gpuready.verbs.bench.judge import SCALING_EXPECTED, BenchJudge, judge_bench, topology_of

__all__ = ["SCALING_EXPECTED", "BenchJudge", "judge_bench", "topology_of"]
