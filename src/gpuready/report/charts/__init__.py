"""The HTML report's charts: one builder per kind of evidence, each returning no chart where the document lacks it."""

from gpuready.report.charts.base import Chart
from gpuready.report.charts.collectives import collective_charts
from gpuready.report.charts.fleet import fleet_charts
from gpuready.report.charts.matrices import matrix_charts
from gpuready.report.charts.per_gpu import per_gpu_charts
from gpuready.report.charts.plan import plan_charts
from gpuready.report.charts.scaling import scaling_charts
from gpuready.report.charts.telemetry import telemetry_charts

__all__ = ["Chart", "collective_charts", "fleet_charts", "matrix_charts", "per_gpu_charts", "plan_charts",
           "scaling_charts", "telemetry_charts"]
