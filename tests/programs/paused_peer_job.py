"""A plain ``tf.distribute.MultiWorkerMirroredStrategy()`` task (TF2 behaviour) that sums
one value over the workers COUNT times, at most 20 a second (so that COUNT / 20 s of
collectives); run in every task (``TF_CONFIG`` set) as
``python -m tests.programs.paused_peer_job COUNT``.

Prints ``STARTED`` after its first sum, then ``RESULT n`` (the sums done) at the end, or
``ERROR Type: first line`` when a sum fails.
"""
import sys
import time

import tensorflow as tf


def main(argv):
    count = int(argv[0])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    @tf.function
    def total():
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.constant(1.0)), axis=None)

    done = 0
    try:
        while done < count:
            total()
            done += 1
            if done == 1:
                print("STARTED", flush=True)
            time.sleep(0.05)
    except tf.errors.OpError as error:
        print(f"ERROR {type(error).__name__}: {error.message.strip().splitlines()[0]}",
              flush=True)
        return 1
    print(f"RESULT {done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
