"""The guards a distributed run gets without asking: preemption, a lost peer, replicas
that drift apart; and the advice when its workers' exchange outweighs their compute.
Imports no TensorFlow itself.
"""
