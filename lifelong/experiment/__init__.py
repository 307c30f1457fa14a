"""The experiment layer, on top of the continual-learning core.

Run configs, runs and their directories, checkpoints, the run index, sweeps, reports and the
``lifelong`` command line.
"""
