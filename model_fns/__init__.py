"""Reusable Estimator model_fns.

Imports nothing from ``estimator_dist``: take this package alone into any codebase.
"""
from model_fns.dense import dense_classifier_model_fn
from model_fns.lstm import lstm_model_fn

__all__ = ["dense_classifier_model_fn", "lstm_model_fn"]
