"""Programs the tests run in processes of their own, and the TF1-style models they share."""
