"""The guards a distributed run gets without asking: preemption, a lost peer, replicas
that drift apart. Imports no TensorFlow itself.
"""
