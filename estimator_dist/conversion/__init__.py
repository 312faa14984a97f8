"""Conversion to Keras: a train run's checkpoint (``to_keras``) or any TF1 checkpoint by a
mapping file, and the Keras builders of the built-in models. Imports no TensorFlow itself.
"""
