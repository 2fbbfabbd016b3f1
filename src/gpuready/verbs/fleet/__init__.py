"""`gpuready fleet`: many nodes' reports → per-measurement spreads per cohort and the nodes that stand out."""
