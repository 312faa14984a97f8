"""The train/evaluate/export job of one task: settings, training, checkpoints, progress."""
